print("noop")
