"""The `curator` command line (`main`), one module per subcommand."""
