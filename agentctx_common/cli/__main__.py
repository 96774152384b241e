import sys

from agentctx_common.cli.main import main

sys.exit(main())
