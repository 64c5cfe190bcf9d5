from rwkvzip.cli import run

run()
