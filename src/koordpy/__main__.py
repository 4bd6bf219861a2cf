"""``python -m koordpy``: the same command as the ``koordpy`` console script."""

from koordpy.cli.main import main

if __name__ == "__main__":
    main(prog_name="koordpy")
