package bfd

import "golang.org/x/sys/unix"

// queued reports whether a datagram waits in the socket fd (SIOCINQ: the
// size of the next one).
func queued(fd uintptr) bool {
	n, err := unix.IoctlGetInt(int(fd), unix.SIOCINQ)
	return err == nil && n > 0
}
