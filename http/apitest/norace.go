//go:build !race

package apitest

const raceEnabled = false
