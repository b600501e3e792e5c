//go:build race

package edge

// raceEnabled: the race detector's instrumentation deepens every frame,
// so stack sizes say nothing under it.
const raceEnabled = true
