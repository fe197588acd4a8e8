"""Replays a recorded stream (argv[1]) to stdout line by line, then exits with argv[2]."""
import sys

with open(sys.argv[1], "rb") as f:
    for line in f:
        sys.stdout.buffer.write(line)
        sys.stdout.buffer.flush()
sys.exit(int(sys.argv[2]))
