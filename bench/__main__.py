"""`python -m bench`: see bench/README.md."""

from bench.runner import main

if __name__ == "__main__":
    main()
