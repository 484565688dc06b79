# Shortcuts for the scripts in scripts/ (the scripts are the real commands: make may be missing on a
# fresh machine).
.PHONY: run test bench setup format

run:
	./scripts/run.sh

test:
	./scripts/test.sh

bench:
	./scripts/bench.sh

setup:
	./scripts/setup.sh

format:
	swift format format --in-place --recursive Package.swift Sources Tests
