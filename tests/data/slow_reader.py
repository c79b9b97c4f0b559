"""Reads standard input at about RATE bytes a second, as a slow terminal or
log shipper does, and prints what it got: the lines, the bytes, and every
line cohort run wrote about dropping output.

    slow_reader.py RATE
"""
import sys, time

rate = float(sys.argv[1])
lines = 0
total = 0
markers = []
start = time.monotonic()
tail = b""
while True:
    chunk = sys.stdin.buffer.read1(65536)
    if not chunk:
        break
    total += len(chunk)
    lines += chunk.count(b"\n")
    text = tail + chunk
    for line in text.split(b"\n")[:-1]:
        if line.startswith(b"cohort run:"):
            markers.append(line.decode(errors="replace"))
    tail = text.rsplit(b"\n", 1)[-1][-200:]
    ahead = total / rate - (time.monotonic() - start)
    if ahead > 0:
        time.sleep(ahead)
print("lines %d bytes %d seconds %.1f" % (lines, total, time.monotonic() - start))
for marker in markers:
    print(marker)
