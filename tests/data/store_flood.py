"""What an unauthenticated peer on another host can do to a job's store:
2,000 silent connections to the agents' store, and 64 connections to the
PyTorch port that each announce a CHECK of 8,388,608 keys and then send a
byte per round. Meanwhile it times a handshake of its own with the job's
token (from COHORT_JOB_TOKEN), as a joining node would make.

    store_flood.py HOST STORE_PORT TORCH_PORT_FILE SECONDS DONE_FILE

Then it guesses the token 4 times, and makes one more handshake with the
right one: once an address failed more than twice, every answer to it
waits.

Prints "handshake under flood: N ms" for each timed handshake, "guess K:
N ms" for each wrong guess and "right after guesses: N ms", then makes
DONE_FILE (the job's workers wait for it, so the store outlives all this);
exits 0.
"""
import hashlib, hmac, os, re, resource, socket, struct, sys, time

host, store_port, port_file, seconds, done_file = (sys.argv[1], int(sys.argv[2]), sys.argv[3],
                                                   float(sys.argv[4]), sys.argv[5])
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


# The protocol version this cohort speaks, as its source says (kVersion).
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "src", "store",
                       "protocol.hpp")) as header:
    VERSION = int(re.search(r"kVersion = (\d+);", header.read()).group(1))


def frame(payload):
    return struct.pack("<I", len(payload)) + payload


def field(data):
    return struct.pack("<I", len(data)) + data


def receive_frame(sock):
    header = b""
    while len(header) < 4:
        header += sock.recv(4 - len(header))
    length = struct.unpack("<I", header)[0]
    payload = b""
    while len(payload) < length:
        payload += sock.recv(length - len(payload))
    return payload


def handshake(token, accepted=True):
    """docs/store-protocol.md's handshake, as cohort's client makes it.
    Returns the milliseconds of the whole, and from the proof to the verdict."""
    began = time.monotonic()
    with socket.create_connection((host, store_port), timeout=30) as sock:
        nonce = os.urandom(32)
        sock.sendall(frame(b"COHS" + bytes([VERSION]) + field(nonce)))
        answer = receive_frame(sock)
        assert answer[0] == 0, answer
        server_nonce = answer[5:5 + struct.unpack("<I", answer[1:5])[0]]
        label = b"cohort store: the client knows the token\n"
        proof = hmac.new(token, label + nonce + server_nonce, hashlib.sha256).digest()
        start = time.monotonic()
        sock.sendall(frame(field(proof) + field(b"")))
        verdict = receive_frame(sock)[:1]
        assert (verdict == b"\0") == accepted, verdict
    return (time.monotonic() - began) * 1000, (time.monotonic() - start) * 1000


def first_connection():
    """The store may not listen yet, and right after another test cut a
    node's link this host may not reach it for a moment (No route to host)."""
    deadline = time.monotonic() + 30
    while True:
        try:
            return socket.create_connection((host, store_port), timeout=5)
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


silent = [first_connection()]
for _ in range(1999):
    silent.append(socket.create_connection((host, store_port)))
while not os.path.exists(port_file) or not open(port_file).read().strip():
    time.sleep(0.05)
torch_port = int(open(port_file).read())
flood = []
for _ in range(64):
    sock = socket.create_connection((host, torch_port))
    sock.sendall(bytes([4]) + struct.pack("<Q", 8388608))  # CHECK of 8,388,608 keys
    flood.append(sock)
token = os.environ["COHORT_JOB_TOKEN"].encode()
end = time.monotonic() + seconds
timed = 0
while time.monotonic() < end or timed < 5:
    timed += 1
    for sock in flood:
        sock.send(b"\0")
    print("handshake under flood: %.1f ms" % handshake(token)[0], flush=True)
    time.sleep(0.2)
for guess in range(1, 5):
    print("guess %d: %.1f ms" % (guess, handshake(b"%032d" % guess, accepted=False)[1]), flush=True)
print("right after guesses: %.1f ms" % handshake(token)[1], flush=True)
open(done_file, "w").close()
