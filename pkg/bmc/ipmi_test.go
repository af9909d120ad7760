package bmc

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"
)

// hostileBMC answers every datagram on loopback with what reply makes of
// it, as a broken or hostile host at a BMC's address would.
func hostileBMC(t *testing.T, reply func(req []byte) []byte) string {
	t.Helper()
	conn, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	go func() {
		buf := make([]byte, 2048)
		for {
			n, from, err := conn.ReadFrom(buf)
			if err != nil {
				return
			}
			if out := reply(append([]byte(nil), buf[:n]...)); out != nil {
				conn.WriteTo(out, from)
			}
		}
	}()
	return conn.LocalAddr().String()
}

// TestIPMIHostileAnswers: a BMC address that is silent, or answers
// garbage, a truncated RMCP+ message, or one whose lengths lie, gives
// Unknown with a reason within the question's time, and no panic.
func TestIPMIHostileAnswers(t *testing.T) {
	rmcpHeader := []byte{0x06, 0x00, 0xff, 0x07} // RMCP v1.0, IPMI class
	tests := []struct {
		name  string
		reply func(req []byte) []byte
	}{
		{"silent", func([]byte) []byte { return nil }},
		{"garbage", func([]byte) []byte { return []byte("HTTP/1.1 400 Bad Request\r\n\r\n") }},
		{"an RMCP header alone", func([]byte) []byte { return rmcpHeader }},
		{"an RMCP+ header whose length lies", func([]byte) []byte {
			// auth type RMCP+, payload type IPMI, session 0, sequence 0,
			// payload length 0xffff, and nothing after it.
			return append(append([]byte{}, rmcpHeader...), 0x06, 0x00, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff)
		}},
		{"the request echoed", func(req []byte) []byte { return req }},
		{"a maximal datagram of zeros", func([]byte) []byte { return make([]byte, 1400) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			addr := hostileBMC(t, tt.reply)
			target := Target{Machine: "m", Protocol: IPMI, Address: addr, Credentials: func() (string, string, error) { return "admin", "secret", nil }}
			ctx, cancel := context.WithTimeout(context.Background(), 600*time.Millisecond)
			defer cancel()
			start := time.Now()
			st, conn, err := question(ctx, Dial, target, nil)
			if conn != nil {
				conn.Close()
			}
			if took := time.Since(start); took > 3*time.Second {
				t.Errorf("took %s for a 600ms question", took)
			}
			if st != Unknown || err == nil {
				t.Fatalf("state %q, error %v; want Unknown with a reason", st, err)
			}
			if !strings.Contains(err.Error(), "IPMI") {
				t.Errorf("reason %q does not say it was IPMI", err)
			}
		})
	}
}
