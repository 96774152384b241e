"""The mapping of agentctx_adk._llm (ADK LlmRequest/LlmResponse <-> agentctx
messages) and the content and usage mapping it uses, without a server;
run in the ADK venv by test_adk_llm_mapping.py."""

from __future__ import annotations

import pytest
from agentctx_adk import CACHE_METADATA_KEY, AgentCtxLlm, _convert, _llm
from google.adk.models.llm_request import LlmRequest
from google.genai import types

import agentctx_client
from agentctx.context.v1 import context_service_pb2 as pb
from agentctx.type.v1 import cache_pb2, content_pb2, event_pb2, generation_pb2

SESSION = "apps/a/users/u/sessions/s"


def request(**config: object) -> LlmRequest:
    labels = {_llm.SESSION_LABEL: SESSION, **config.pop("labels", {})}  # type: ignore[dict-item]
    return LlmRequest(model=config.pop("model", None), config=types.GenerateContentConfig(labels=labels, **config))


def reply(**fields: object) -> pb.GenerateResponse:
    return pb.GenerateResponse(reply=event_pb2.Event(**fields))


# --- LlmRequest -> GenerateRequest ----------------------------------------------------


def test_a_request_names_the_session_the_plugin_recorded_and_stores_nothing() -> None:
    out = _llm.generate_request(request(labels={"adk_agent_name": "planner"}), "local-sim-1")
    assert out.session == SESSION
    assert out.storage == pb.TURN_STORAGE_NONE
    assert out.model == "local-sim-1" and out.agent == "planner"
    assert not out.input, "the context service builds the contents from the stored events"
    assert _llm.generate_request(request(model="local-sim-2"), "local-sim-1").model == "local-sim-2"


def test_a_request_without_the_plugins_label_says_what_is_missing() -> None:
    with pytest.raises(ValueError, match="AgentCtxPlugin"):
        _llm.generate_request(LlmRequest(config=types.GenerateContentConfig()))
    with pytest.raises(ValueError, match="AgentCtxPlugin"):
        _llm.generate_request(LlmRequest())


@pytest.mark.parametrize(("instruction", "texts"), [
    ("Be brief.", ["Be brief."]),
    (types.Content(role="user", parts=[types.Part(text="A"), types.Part(text=""), types.Part(text="B")]), ["A", "B"]),
    (types.Part(text="P"), ["P"]),
    (["x", types.Part(text="y")], ["x", "y"]),
])
def test_the_system_instruction_is_sent_as_text_parts(instruction: object, texts: list[str]) -> None:
    out = _llm.generate_request(request(system_instruction=instruction))
    assert [p.text for p in out.system_instruction.parts] == texts
    assert out.system_instruction.role == "user"


def test_an_empty_system_instruction_is_not_sent() -> None:
    assert not _llm.generate_request(request(system_instruction="")).HasField("system_instruction")
    assert not _llm.generate_request(request()).HasField("system_instruction")


def test_function_tools_are_sent_with_json_schemas() -> None:
    weather = types.FunctionDeclaration(
        name="get_weather", description="Weather for a city.",
        parameters=types.Schema(type=types.Type.OBJECT, required=["city"], properties={
            "city": types.Schema(type=types.Type.STRING, description="The city."),
            "days": types.Schema(type=types.Type.ARRAY, items=types.Schema(type=types.Type.INTEGER))}),
        response=types.Schema(type=types.Type.OBJECT, properties={"forecast": types.Schema(type=types.Type.STRING)}),
    )
    lookup = types.FunctionDeclaration(name="lookup", parameters_json_schema={
        "type": "object", "properties": {"q": {"type": "string", "maxLength": 64}}},
        response_json_schema={"type": "string"})
    bare = types.FunctionDeclaration(name="ping")
    out = _llm.generate_request(request(tools=[types.Tool(function_declarations=[weather, lookup]),
                                               types.Tool(function_declarations=[bare])]))
    assert [[d.name for d in t.function_declarations] for t in out.tools] == [["get_weather", "lookup"], ["ping"]]
    sent = out.tools[0].function_declarations
    assert sent[0].description == "Weather for a city."
    assert _convert.from_struct(sent[0].parameters) == {
        "type": "object", "required": ["city"], "properties": {
            "city": {"type": "string", "description": "The city."},
            "days": {"type": "array", "items": {"type": "integer"}}}}
    assert _convert.from_struct(sent[0].response) == {"type": "object", "properties": {"forecast": {"type": "string"}}}
    assert _convert.from_struct(sent[1].parameters) == {"type": "object", "properties": {
        "q": {"type": "string", "maxLength": 64}}}
    assert _convert.from_struct(sent[1].response) == {"type": "string"}
    assert not out.tools[1].function_declarations[0].HasField("parameters")


def test_tools_other_than_functions_are_refused() -> None:
    with pytest.raises(ValueError, match="function tools only"):
        _llm.generate_request(request(tools=[types.Tool(google_search=types.GoogleSearch())]))


@pytest.mark.parametrize(("mode", "sent"), [
    (types.FunctionCallingConfigMode.AUTO, generation_pb2.FUNCTION_CALLING_MODE_AUTO),
    (types.FunctionCallingConfigMode.ANY, generation_pb2.FUNCTION_CALLING_MODE_ANY),
    (types.FunctionCallingConfigMode.NONE, generation_pb2.FUNCTION_CALLING_MODE_NONE),
    (types.FunctionCallingConfigMode.VALIDATED, generation_pb2.FUNCTION_CALLING_MODE_UNSPECIFIED),
])
def test_the_tool_config_is_sent(mode: types.FunctionCallingConfigMode, sent: int) -> None:
    config = types.ToolConfig(function_calling_config=types.FunctionCallingConfig(
        mode=mode, allowed_function_names=["get_weather"]))
    out = _llm.generate_request(request(tool_config=config))
    assert out.tool_config.mode == sent
    assert list(out.tool_config.allowed_function_names) == ["get_weather"]
    assert not _llm.generate_request(request()).HasField("tool_config")


def test_generation_settings_are_sent_and_unset_ones_left_unset() -> None:
    out = _llm.generate_request(request(temperature=0.25, top_p=0.5, top_k=40.0, max_output_tokens=256,
                                        stop_sequences=["END"], seed=7, response_mime_type="application/json"))
    g = out.generation_config
    assert (g.temperature, g.top_p, g.top_k, g.max_output_tokens, g.seed) == (0.25, 0.5, 40, 256, 7)
    assert list(g.stop_sequences) == ["END"] and g.response_mime_type == "application/json"
    empty = _llm.generate_request(request()).generation_config
    assert not any(empty.HasField(f) for f in ("temperature", "top_p", "top_k", "max_output_tokens", "seed"))


# --- GenerateResponse -> LlmResponse ---------------------------------------------------


def test_a_text_reply_with_usage_and_a_cache_hit() -> None:
    response = reply(
        id="r1", content=content_pb2.Content(role="model", parts=[content_pb2.Part(text="Sunny.")]),
        finish_reason=generation_pb2.FINISH_REASON_STOP, model_version="local-sim-1-001",
        usage=generation_pb2.Usage(prompt_tokens=1200, cached_prompt_tokens=1024, output_tokens=5, total_tokens=1205),
        cache_metadata=cache_pb2.CacheMetadata(state=cache_pb2.CACHE_STATE_HIT, prefix_fingerprint="fp1",
                                               prefix_tokens=1024, uses=3, scope_fingerprint="scope"),
    )
    out = _llm.llm_response(response)
    assert out.content == types.Content(role="model", parts=[types.Part(text="Sunny.")])
    assert out.usage_metadata == types.GenerateContentResponseUsageMetadata(
        prompt_token_count=1200, cached_content_token_count=1024, candidates_token_count=5, total_token_count=1205)
    assert out.finish_reason == types.FinishReason.STOP and out.model_version == "local-sim-1-001"
    assert out.custom_metadata == {
        CACHE_METADATA_KEY: {"state": "HIT", "prefix_fingerprint": "fp1", "prefix_tokens": 1024, "uses": 3},
        "agentctx_reply_id": "r1"}


def test_a_function_call_reply_keeps_its_id_and_int_arguments() -> None:
    call = content_pb2.FunctionCall(id="call-1", name="get_weather")
    call.args.update({"city": "Paris", "days": 3, "ratio": 0.5, "tags": [1, "a"]})
    out = _llm.llm_response(reply(id="r2", content=content_pb2.Content(
        role="model", parts=[content_pb2.Part(function_call=call)])))
    fc = out.content.parts[0].function_call  # type: ignore[union-attr, index]
    assert (fc.id, fc.name, fc.args) == ("call-1", "get_weather", {"city": "Paris", "days": 3, "ratio": 0.5,
                                                                    "tags": [1, "a"]})
    assert isinstance(fc.args["days"], int)  # type: ignore[index]
    assert out.usage_metadata is None and out.finish_reason is None and out.model_version is None


def test_a_bypassed_call_says_why_and_uncached_usage_has_no_cached_count() -> None:
    response = reply(id="r3", usage=generation_pb2.Usage(prompt_tokens=10, output_tokens=2, total_tokens=12,
                                                         thoughts_tokens=4),
                     cache_metadata=cache_pb2.CacheMetadata(
                         state=cache_pb2.CACHE_STATE_BYPASS,
                         bypass_reason=cache_pb2.CACHE_BYPASS_REASON_BELOW_MIN_TOKENS))
    response.compactions.add(id="c1")
    response.reply.finish_reason = 99  # type: ignore[assignment]  # newer than these stubs
    out = _llm.llm_response(response)
    assert out.content is None
    assert out.usage_metadata is not None
    assert out.usage_metadata.cached_content_token_count is None and out.usage_metadata.thoughts_token_count == 4
    assert out.finish_reason == types.FinishReason.OTHER
    assert out.custom_metadata == {CACHE_METADATA_KEY: {"state": "BYPASS", "bypass_reason": "BELOW_MIN_TOKENS"},
                                   "agentctx_reply_id": "r3", "agentctx_compactions": 1}


@pytest.mark.parametrize("name", ["STOP", "MAX_TOKENS", "SAFETY", "RECITATION", "MALFORMED_FUNCTION_CALL", "OTHER"])
def test_finish_reasons_map_by_name(name: str) -> None:
    response = reply(id="r", finish_reason=generation_pb2.FinishReason.Value(f"FINISH_REASON_{name}"))
    assert _llm.llm_response(response).finish_reason == types.FinishReason[name]


def test_a_reply_from_a_server_before_the_fields_reads_them_from_custom_metadata() -> None:
    response = reply(id="r")
    response.reply.custom_metadata.update({"finish_reason": "MAX_TOKENS", "model_version": "m-001"})
    out = _llm.llm_response(response)
    assert out.finish_reason == types.FinishReason.MAX_TOKENS and out.model_version == "m-001"
    response.reply.custom_metadata.update({"finish_reason": "SOMETHING_NEW"})
    assert _llm.llm_response(response).finish_reason == types.FinishReason.OTHER


# --- content and usage, both ways ------------------------------------------------------


def test_usage_round_trips_and_negative_counts_become_zero() -> None:
    usage = types.GenerateContentResponseUsageMetadata(prompt_token_count=100, cached_content_token_count=64,
                                                       candidates_token_count=7, thoughts_token_count=3,
                                                       total_token_count=110)
    assert _convert.usage_from_proto(_convert.usage_to_proto(usage)) == usage  # type: ignore[arg-type]
    odd = _convert.usage_to_proto(types.GenerateContentResponseUsageMetadata(prompt_token_count=-1))
    assert odd is not None and odd.prompt_tokens == 0
    assert _convert.usage_to_proto(None) is None


def test_function_calls_and_responses_cross_in_their_roles_only() -> None:
    call = types.Part(function_call=types.FunctionCall(id="c1", name="lookup", args={"q": "x", "n": 2}))
    answer = types.Part(function_response=types.FunctionResponse(id="c1", name="lookup", response={"ok": True}))
    model, exact = _convert.content_to_proto(types.Content(role="model", parts=[call]))
    assert exact and model is not None and model.parts[0].function_call.name == "lookup"
    user, exact = _convert.content_to_proto(types.Content(role="user", parts=[answer]))
    assert exact and user is not None and user.parts[0].function_response.id == "c1"
    assert _convert.content_from_proto(model) == types.Content(role="model", parts=[call])
    assert _convert.content_from_proto(user) == types.Content(role="user", parts=[answer])
    # A call in a user content, or a response without an id, has no agentctx field: kept aside.
    assert _convert.content_to_proto(types.Content(role="user", parts=[call])) == (None, False)
    no_id = types.Part(function_response=types.FunctionResponse(name="lookup", response={}))
    assert _convert.content_to_proto(types.Content(role="user", parts=[no_id])) == (None, False)
    # NaN has no JSON form; the rest of the content still goes.
    nan = types.Part(function_call=types.FunctionCall(id="c2", name="f", args={"x": float("nan")}))
    text = types.Part(text="and")
    partial, exact = _convert.content_to_proto(types.Content(role="model", parts=[nan, text]))
    assert not exact and partial is not None and [p.text for p in partial.parts] == ["and"]


def test_a_role_other_than_user_or_model_follows_the_author() -> None:
    proto, exact = _convert.content_to_proto(types.Content(role="tool", parts=[types.Part(text="x")]), author="user")
    assert proto is not None and proto.role == "user" and not exact
    proto, _ = _convert.content_to_proto(types.Content(parts=[types.Part(text="x")]), author="planner")
    assert proto is not None and proto.role == "model"


# --- errors of a call -----------------------------------------------------------------


async def test_a_call_that_cannot_reach_the_context_service_raises_the_clients_error(
        unused_tcp_port: int) -> None:
    client = agentctx_client.connect(f"127.0.0.1:{unused_tcp_port}", insecure_loopback=True,
                                     retry=agentctx_client.RetryPolicy(max_attempts=1))
    try:
        llm = AgentCtxLlm(client, model="local-sim-1", timeout=2.0)
        with pytest.raises((agentctx_client.UnavailableError, agentctx_client.DeadlineExceededError)):
            async for _ in llm.generate_content_async(request()):
                pass
    finally:
        await client.close()
