package bmc

import (
	"context"
	"fmt"
)

// Dial opens a session with a target's BMC by its protocol.
func Dial(ctx context.Context, t Target) (Conn, error) {
	switch t.Protocol {
	case IPMI:
		return dialIPMI(ctx, t)
	case Redfish:
		return dialRedfish(ctx, t)
	}
	return nil, fmt.Errorf("protocol %q is not one of ipmi, redfish", t.Protocol)
}
