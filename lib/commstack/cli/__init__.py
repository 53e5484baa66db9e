"""The `commstack` command (its entry point: commstack.cli.main), one module per group of commands;
each module's add_NAME adds the options of command NAME, cmd_NAME runs it.

  main     the commands (name, module, help line), the parser, the dispatch to a command, its errors and
           exit status
  run      run, suite, status: a suite launched, judged and reported, or printed, or submitted
  results  report, compare, history, export, parse: results already there
  envs     setup, lock, preflight, containerize, images, mirror: the Spack environments
  local    test, slurm: this machine's test tiers and embedded Slurm
"""
