package framework

import (
	"fmt"
	"testing"
	"time"
)

// Poll calls cond every interval until it holds, or until timeout has
// passed, then returns an error with the last thing cond said.
func Poll(timeout, interval time.Duration, cond func() (bool, string)) error {
	deadline := time.Now().Add(timeout)
	for {
		ok, msg := cond()
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not so after %s: %s", timeout, msg)
		}
		time.Sleep(interval)
	}
}

// Eventually polls cond until it holds or timeout passes, then fails the
// test with the last thing cond said.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	if err := Poll(timeout, 200*time.Millisecond, cond); err != nil {
		t.Fatalf("%s: %v", what, err)
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
