package bmc

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	ipmi "github.com/bougou/go-ipmi/pkg/client"
)

// IPMI over LAN (RMCP+, IPMI v2.0 "lanplus"), with go-ipmi: a session is
// opened once (Get Channel Authentication Capabilities, Open Session,
// RAKP 1-4) and each question is one Get Chassis Status.

// ipmiTries is how many times a lost UDP datagram is sent again within
// one question's timeout.
const ipmiTries = 2

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
	c.WithInterface(ipmi.InterfaceLanplus).WithTimeout(per).WithRetry(ipmiTries - 1)
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
