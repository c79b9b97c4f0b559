"""Prints this worker's environment, one `env RANK NAME=VALUE` line per
variable, for comparing what two launchers set (python_test.cpp)."""
import os

rank = os.environ.get("RANK", "?")
print("".join(f"env {rank} {name}={value}\n" for name, value in sorted(os.environ.items())
              if "\n" not in value), end="", flush=True)
