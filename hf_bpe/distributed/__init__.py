"""Train and tokenize corpora larger than one machine's patience, on Ray or on local cores, exactly.

- :func:`train`: the model :func:`hf_bpe.train` would learn on the same documents, with counting
  spread over Ray tasks and the count tables combined in a tree (:mod:`hf_bpe.distributed._training`).
- :func:`tokenize_files`: a corpus to shards of ids (a flat ``.bin`` with a ``.idx`` of document
  boundaries, and Parquet), with a manifest, resumable after a failure
  (:mod:`hf_bpe.distributed._tokenizing`).

Ray is optional (``pip install 'hf_bpe[ray]'``): both run on Ray when this process is connected to it
(``ray.init()``) or ``ray_address`` is given, and on this machine's cores otherwise. On a cluster,
every node needs hf_bpe installed and the input files at the same path (a shared file system), and
``tokenize_files``' ``out_dir`` must be shared too. ``docs/scale.md`` works out 1 TB on 64 nodes.
"""

from hf_bpe.distributed._cluster import import_ray
from hf_bpe.distributed._tokenizing import ShardError, tokenize_files
from hf_bpe.distributed._training import train

__all__ = ["ShardError", "import_ray", "tokenize_files", "train"]
