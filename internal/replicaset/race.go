//go:build race

package replicaset

// raceEnabled: the binary Build makes is race-enabled like the test binary.
const raceEnabled = true
