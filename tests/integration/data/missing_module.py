import no_such_module_for_ddprun_tests  # noqa: F401  (the worker dies of it)
