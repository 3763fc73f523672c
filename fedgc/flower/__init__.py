"""Everything that touches Flower lives here: apps, strategy, grids and the wire codec."""
