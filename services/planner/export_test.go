package planner

// EditCells is how many edit-distance cells suggest has filled so far in this process.
func EditCells() int64 { return editCells.Load() }
