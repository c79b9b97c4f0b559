"""Prints every option string of this PyTorch's torchrun, one per line, from
its own argument parser (torch.distributed.run.get_args_parser)."""
from torch.distributed.run import get_args_parser

for action in get_args_parser()._actions:
    for option in action.option_strings:
        if option not in ("-h", "--help"):
            print(option)
