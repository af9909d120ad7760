package bmc

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	ipmi "github.com/bougou/go-ipmi/pkg/client"
	"github.com/bougou/go-ipmi/pkg/types"
)

// IPMI over LAN (RMCP+, IPMI v2.0 "lanplus"), with go-ipmi: a session is
// opened once (Get Channel Authentication Capabilities, Open Session,
// RAKP 1-4) and each question is one Get Chassis Status.

// ipmiTries is how many times a lost UDP datagram is sent again within
// one question's timeout.
const ipmiTries = 2

// cipherSuites are the RMCP+ cipher suites offered, best first: 17
// (HMAC-SHA256, AES-CBC-128) and 3 (HMAC-SHA1, AES-CBC-128), which IPMI
// v2.0 requires every BMC to have. Never a suite without authentication
// (suite 0 lets anyone in with any password). Naming them also skips
// asking the BMC for its list, which BMCs such as ipmi_sim do not answer:
// the question would wait for its timeout at every login.
var cipherSuites = []types.CipherSuiteID{types.CipherSuiteID17, types.CipherSuiteID3}

type ipmiConn struct {
	client *ipmi.Client
	once   sync.Once
}

func dialIPMI(ctx context.Context, t Target) (Conn, error) {
	host, portText, err := net.SplitHostPort(t.Address)
	if err != nil {
		return nil, fmt.Errorf("IPMI address %q: %w", t.Address, err)
	}
	port, err := strconv.Atoi(portText)
	if err != nil {
		return nil, fmt.Errorf("IPMI address %q: bad port", t.Address)
	}
	user, password, err := t.Credentials()
	if err != nil {
		return nil, fmt.Errorf("reading the BMC's credentials: %w", err)
	}
	c, err := ipmi.NewClient(host, port, user, password)
	if err != nil {
		return nil, err
	}
	// Each exchange waits a share of the question's time, so that its
	// retries end within it.
	per := time.Second
	if deadline, ok := ctx.Deadline(); ok {
		per = max(100*time.Millisecond, time.Until(deadline)/(ipmiTries+1))
	}
	c.WithInterface(ipmi.InterfaceLanplus).WithTimeout(per).WithRetry(ipmiTries - 1).WithCipherSuiteID(cipherSuites...)
	if err := c.Connect(ctx); err != nil {
		// No session: what go-ipmi opened is closed aside, bounded.
		go closeQuietly(c)
		return nil, fmt.Errorf("IPMI session with %s: %w", t.Address, err)
	}
	return &ipmiConn{client: c}, nil
}

// Power asks Get Chassis Status; its "power is on" bit is the answer.
func (c *ipmiConn) Power(ctx context.Context) (PowerState, error) {
	res, err := c.client.GetChassisStatus(ctx)
	if err != nil {
		return Unknown, fmt.Errorf("IPMI Get Chassis Status: %w", err)
	}
	if res.PowerIsOn {
		return On, nil
	}
	return Off, nil
}

// Close ends the session (Close Session, bounded) and its socket.
func (c *ipmiConn) Close() { c.once.Do(func() { closeQuietly(c.client) }) }

func closeQuietly(c *ipmi.Client) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	defer func() { _ = recover() }()
	_ = c.Close(ctx)
}
