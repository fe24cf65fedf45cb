"""sched-sim's faces over `sim_core`: the `sched-sim` command line (`app.cli`) and the web dashboard (`app.web`)."""
