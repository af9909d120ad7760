package framework

import (
	"testing"
	"time"
)

// Eventually polls cond until it holds or timeout passes, then fails the
// test with the last thing cond said.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var last string
	for {
		ok, msg := cond()
		if ok {
			return
		}
		last = msg
		if time.Now().After(deadline) {
			t.Fatalf("%s: not so after %s: %s", what, timeout, last)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// Consistently checks cond for the whole duration and fails the test the
// first time it does not hold.
func Consistently(t testing.TB, duration time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(duration)
	for time.Now().Before(deadline) {
		if ok, msg := cond(); !ok {
			t.Fatalf("%s: stopped holding: %s", what, msg)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
