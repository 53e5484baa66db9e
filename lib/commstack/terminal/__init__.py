"""What `commstack run` and `commstack suite` show on the terminal.

  view     View: commstack's own view of a suite run, a pytest plugin given to pytest.main
  streams  the terminal's stream out of pytest's capture, and pytest.log
  figures  a step's key figure as its line shows it
"""
