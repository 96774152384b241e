# Two commands do all the set-up on a fresh machine:
#   make up    - virtual environment, dev certificates, both services, the demo
#   make test  - virtual environment, the whole test suite
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
TOOLS := tools/node_modules/.bin

.PHONY: up test venv gen lint demo clean

$(STAMP): pyproject.toml constraints.txt clients/python/pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check --upgrade pip
	$(BIN)/pip install --quiet --disable-pip-version-check -c constraints.txt -e clients/python -e '.[test]'
	touch $(STAMP)

venv: $(STAMP)

$(TOOLS)/buf: tools/package.json tools/package-lock.json
	cd tools && npm ci --silent --no-audit --no-fund
	touch $@

up: venv
	$(BIN)/agentctx up

# The scripted agent conversation `make up` shows; it starts the pair itself
# when none is running.
demo: venv
	$(BIN)/agentctx demo

# One pytest worker per core, at most 4 (pytest-xdist), each taking whole
# files so a module's servers start once: most tests wait on processes and
# sockets, so two workers on two cores take about half the time of one.
test: venv $(TOOLS)/buf
	$(BIN)/python -m pytest --numprocesses auto --maxprocesses 4 --dist loadfile

gen: venv $(TOOLS)/buf
	$(BIN)/python scripts/gen_protos.py
	$(BIN)/python scripts/gen_error_table.py
	$(TOOLS)/buf generate

lint: venv $(TOOLS)/buf
	$(TOOLS)/buf lint
	$(TOOLS)/buf breaking --against api/agentctx-v1.binpb
	$(BIN)/ruff check .
	$(BIN)/mypy
	cd clients/python && ../../$(BIN)/mypy
# clients/adk in the ADK venv (built or reused), where google.adk's types are
	ADK_PY=$$($(BIN)/python -m tests.adk.venv) && cd clients/adk && $$ADK_PY -m mypy
# clients/openai-agents in the OpenAI Agents SDK's venv, likewise
	OA_PY=$$($(BIN)/python -m tests.openai_agents.venv) && cd clients/openai-agents && $$OA_PY -m mypy

clean:
	rm -rf $(VENV) .venv-client .venv-adk .venv-openai-agents .venv-apart tools/node_modules tests/polyglot/node_modules tests/polyglot/build .agentctx
