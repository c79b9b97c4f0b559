"""A worker whose TCPStore client the agent's store cannot serve: on
MASTER_PORT it opens as PyTorch 2.x does (VALIDATE) and sends query type 99,
which no PyTorch release sends yet (as a client newer than cohort would),
then waits, as such a client does until its own timeout (30 minutes).
Only cohort stopping the job ends it."""
import os
import socket
import struct
import time

address = (os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]))
connection = socket.create_connection(address)
connection.sendall(b"\x00" + struct.pack("<I", 0x3C85F7CE) + bytes([99]))
time.sleep(600)
