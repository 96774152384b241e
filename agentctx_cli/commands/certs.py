"""``agentctx certs init --dir DIR``: a dev CA and the certificates the
embedded default needs."""

from __future__ import annotations

import argparse
import pathlib

from agentctx_common.errors import ConfigError


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    certs = sub.add_parser("certs", help="development certificates")
    certs_sub = certs.add_subparsers(dest="certs_command", required=True, parser_class=type(certs))
    init = certs_sub.add_parser("init", help="create a dev CA and service/agent certificates")
    init.add_argument("--dir", required=True, type=pathlib.Path, help="output directory")
    init.add_argument("--force", action="store_true", help="replace existing files")
    init.set_defaults(func=run_init)


def run_init(args: argparse.Namespace) -> int:
    from agentctx_common.certs import DEV_LEAVES, init_dev_certs

    try:
        written = init_dev_certs(args.dir, force=args.force)
    except OSError as exc:
        raise ConfigError(f"cannot write certificates to {args.dir}: {exc.strerror}") from None
    if written:
        print(f"wrote {len(written)} files to {args.dir}")
    else:
        print(f"certificates already present in {args.dir} (use --force to replace)")
    for leaf in DEV_LEAVES:
        print(f"  {leaf.stem}.pem  {leaf.spiffe_id}")
    return 0
