"""compare_parameters.py A B TOLERANCE: the largest absolute difference
between two saved parameter sets (examples/python/ddp.py --save); exit 1 when
it exceeds TOLERANCE or the sets differ in names or shapes."""
import sys

import torch

a, b = torch.load(sys.argv[1]), torch.load(sys.argv[2])
tolerance = float(sys.argv[3])
if a.keys() != b.keys() or any(a[k].shape != b[k].shape for k in a):
    print(f"different parameters: {sorted(a)} vs {sorted(b)}")
    sys.exit(1)
largest = max((a[k] - b[k]).abs().max().item() for k in a)
print(f"largest difference {largest:.3g} (tolerance {tolerance:g}) over {len(a)} tensors")
sys.exit(0 if largest <= tolerance else 1)
