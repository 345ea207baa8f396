"""A real-kernel suite: kernels of the Rodinia benchmark suite (its OpenMP/C versions, by
Che et al., University of Virginia), ported with vyre's public builder and checked bit for bit
against the same computation compiled by gcc (c/<kernel>.c, outputs shipped in data/)."""
