package memory

// HoldBuildSlices makes a new node's background build take slices of n
// messages in steps of 1,000 and wait for a value on gate before each
// slice, holding the indexer's lock; a request that starts waiting to
// index its sessions sends on waiting. The returned func restores all.
func HoldBuildSlices(n int, gate <-chan struct{}, waiting chan<- struct{}) func() {
	batch, slice, before, wait := buildBatch, buildSlice, beforeBuildSlice, onPriorityWait
	buildBatch, buildSlice = ChangeBatch, n
	beforeBuildSlice = func() { <-gate }
	onPriorityWait = func() { waiting <- struct{}{} }
	return func() { buildBatch, buildSlice, beforeBuildSlice, onPriorityWait = batch, slice, before, wait }
}
