import sys

from agentctx_cli.main import main

sys.exit(main())
