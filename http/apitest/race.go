//go:build race

package apitest

const raceEnabled = true
