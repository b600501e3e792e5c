//go:build race

package extproc

// raceEnabled: the race detector's instrumentation deepens every frame,
// so stack sizes say nothing under it.
const raceEnabled = true
