"""The `commstack` command: its table of commands, the module of each (commstack.cli.main), and one module per
group of commands, whose add_NAME adds the options of command NAME and cmd_NAME runs it."""
