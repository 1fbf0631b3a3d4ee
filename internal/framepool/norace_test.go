//go:build !race

package framepool

const raceEnabled = false
