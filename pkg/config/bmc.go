package config

import (
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// BMCProtocol is how a machine's baseboard management controller is asked.
type BMCProtocol string

const (
	// BMCIPMI is IPMI v2.0 over LAN (RMCP+, "lanplus").
	BMCIPMI BMCProtocol = "ipmi"
	// BMCRedfish is DMTF Redfish over HTTPS.
	BMCRedfish BMCProtocol = "redfish"
)

// BMC names a machine's baseboard management controller, which the CCM
// asks for the machine's power state. Credentials are files (mounted
// Secrets), read at every login, so that rotating them needs no restart.
type BMC struct {
	// Protocol is ipmi (IPMI v2.0 over LAN, RMCP+) or redfish.
	Protocol BMCProtocol `yaml:"protocol"`
	// Address is host or host:port for IPMI (port 623 by default) and an
	// https:// URL of the Redfish service for Redfish.
	Address string `yaml:"address"`
	// UsernameFile holds the BMC user's name (a mounted Secret's key).
	UsernameFile string `yaml:"usernameFile"`
	// PasswordFile holds its password (a mounted Secret's key).
	PasswordFile string `yaml:"passwordFile"`
	// SystemID is the Id of the machine's ComputerSystem in the Redfish
	// service's Systems collection; empty, the collection must hold one.
	SystemID string `yaml:"systemID"`
	// TLS is how a Redfish service's certificate is checked.
	TLS BMCTLS `yaml:"tls"`
}

// BMCTLS is how a Redfish service's certificate is checked.
type BMCTLS struct {
	// CAFile holds the PEM certificates that sign the BMC's; without it,
	// the system's roots.
	CAFile string `yaml:"caFile"`
	// InsecureSkipVerify accepts any certificate: only when said.
	InsecureSkipVerify bool `yaml:"insecureSkipVerify"`
}

// DefaultIPMIPort is the port of an IPMI address given without one.
const DefaultIPMIPort = 623

// IPMI limits of RMCP+ (IPMI v2.0 section 13.31): a user name of 16
// bytes and a password of 20.
const (
	maxIPMIUsername = 16
	maxIPMIPassword = 20
	maxSecret       = 1024
)

// PowerChecks bounds how the CCM asks BMCs (inventory.powerChecks).
type PowerChecks struct {
	// Interval between two questions to the BMC of a NotReady node.
	Interval Duration `yaml:"interval"`
	// BackgroundInterval between two questions to the BMC of a Ready one.
	BackgroundInterval Duration `yaml:"backgroundInterval"`
	// Timeout of one question, login included.
	Timeout Duration `yaml:"timeout"`
	// Concurrency is how many BMCs are asked at once.
	Concurrency int `yaml:"concurrency"`
}

// OutOfService is the node.kubernetes.io/out-of-service taint, which the
// CCM adds to a NotReady Node whose BMC has said "off" for GracePeriod
// (inventory.outOfService).
type OutOfService struct {
	// Enabled turns the taint on (off by default).
	Enabled bool `yaml:"enabled"`
	// GracePeriod is how long the BMC must have said "off" of a NotReady
	// Node's machine.
	GracePeriod Duration `yaml:"gracePeriod"`
}

// Defaults of inventory.powerChecks and inventory.outOfService.
const (
	DefaultPowerCheckInterval   = 10 * time.Second
	DefaultPowerCheckBackground = 10 * time.Minute
	DefaultPowerCheckTimeout    = 5 * time.Second
	DefaultPowerCheckWorkers    = 16
	DefaultOutOfServiceGrace    = 60 * time.Second
)

func (inv *Inventory) setBMCDefaults() {
	pc := &inv.PowerChecks
	if pc.Interval.Duration == 0 {
		pc.Interval.Duration = DefaultPowerCheckInterval
	}
	if pc.BackgroundInterval.Duration == 0 {
		pc.BackgroundInterval.Duration = DefaultPowerCheckBackground
	}
	if pc.Timeout.Duration == 0 {
		pc.Timeout.Duration = DefaultPowerCheckTimeout
	}
	if pc.Concurrency == 0 {
		pc.Concurrency = DefaultPowerCheckWorkers
	}
	if inv.OutOfService.GracePeriod.Duration == 0 {
		inv.OutOfService.GracePeriod.Duration = DefaultOutOfServiceGrace
	}
}

func (inv *Inventory) validateBMCs(add reporter, root *field.Path, readSecrets bool) {
	pc, pp := inv.PowerChecks, root.Child("powerChecks")
	if pc.Interval.Duration < time.Second {
		add(pp.Child("interval"), "%s is shorter than 1s", pc.Interval.Duration)
	}
	if pc.BackgroundInterval.Duration < pc.Interval.Duration {
		add(pp.Child("backgroundInterval"), "%s is shorter than interval (%s)", pc.BackgroundInterval.Duration, pc.Interval.Duration)
	}
	if pc.Timeout.Duration < 100*time.Millisecond || pc.Timeout.Duration > pc.Interval.Duration {
		add(pp.Child("timeout"), "%s is not between 100ms and interval (%s)", pc.Timeout.Duration, pc.Interval.Duration)
	}
	if pc.Concurrency < 1 || pc.Concurrency > 256 {
		add(pp.Child("concurrency"), "%d is not between 1 and 256", pc.Concurrency)
	}
	if inv.OutOfService.GracePeriod.Duration < 0 {
		add(root.Child("outOfService", "gracePeriod"), "%s is negative", inv.OutOfService.GracePeriod.Duration)
	}
	for i := range inv.Machines {
		if b := inv.Machines[i].BMC; b != nil {
			b.validate(add, root.Child("machines").Index(i).Child("bmc"), readSecrets)
		}
	}
}

func (b *BMC) validate(add reporter, p *field.Path, readSecrets bool) {
	switch b.Protocol {
	case BMCIPMI:
		if _, _, err := b.IPMIHostPort(); err != nil {
			add(p.Child("address"), "%v", err)
		}
		if b.SystemID != "" {
			add(p.Child("systemID"), "is for Redfish only")
		}
		if b.TLS != (BMCTLS{}) {
			add(p.Child("tls"), "is for Redfish only: IPMI over LAN has no TLS")
		}
	case BMCRedfish:
		if _, err := b.RedfishURL(); err != nil {
			add(p.Child("address"), "%v", err)
		}
		if b.SystemID != "" && (strings.ContainsAny(b.SystemID, "/?#%") || len(b.SystemID) > 128) {
			add(p.Child("systemID"), "%q is not a ComputerSystem Id (no /, ?, #, %%; at most 128 bytes)", b.SystemID)
		}
		if b.TLS.CAFile != "" && b.TLS.InsecureSkipVerify {
			add(p.Child("tls"), "set caFile or insecureSkipVerify, not both")
		}
		if b.TLS.CAFile != "" && readSecrets {
			if _, err := b.CertPool(); err != nil {
				add(p.Child("tls", "caFile"), "%v", err)
			}
		}
	case "":
		add(p.Child("protocol"), "is required (ipmi or redfish)")
	default:
		add(p.Child("protocol"), "%q is not one of ipmi, redfish", b.Protocol)
	}
	if b.UsernameFile == "" {
		add(p.Child("usernameFile"), "is required: the BMC's user name, in a file (a mounted Secret)")
	}
	if b.PasswordFile == "" {
		add(p.Child("passwordFile"), "is required: the BMC's password, in a file (a mounted Secret)")
	}
	if readSecrets && b.UsernameFile != "" && b.PasswordFile != "" {
		if _, _, err := b.Credentials(); err != nil {
			add(p, "%v", err)
		}
	}
}

// IPMIHostPort is where an IPMI BMC listens.
func (b *BMC) IPMIHostPort() (string, int, error) {
	host, port := b.Address, DefaultIPMIPort
	if h, ps, err := net.SplitHostPort(b.Address); err == nil {
		n, err := strconv.Atoi(ps)
		if err != nil || n < 1 || n > 65535 {
			return "", 0, fmt.Errorf("%q: %q is not a port", b.Address, ps)
		}
		host, port = h, n
	}
	if host == "" {
		return "", 0, fmt.Errorf("is required: the BMC's IP address or DNS name, with :port unless 623")
	}
	if net.ParseIP(host) == nil {
		if msgs := validation.IsDNS1123Subdomain(host); len(msgs) > 0 {
			return "", 0, fmt.Errorf("%q is neither an IP address nor a DNS name (host or host:port)", b.Address)
		}
	}
	return host, port, nil
}

// RedfishURL is the Redfish service's root, https://host[:port].
func (b *BMC) RedfishURL() (*url.URL, error) {
	u, err := url.Parse(b.Address)
	switch {
	case b.Address == "":
		return nil, fmt.Errorf("is required: the Redfish service's https:// URL")
	case err != nil:
		return nil, fmt.Errorf("%q is not a URL: %v", b.Address, err)
	case u.Scheme != "https":
		return nil, fmt.Errorf("%q is not an https:// URL (Redfish sends the password; plain HTTP is refused)", b.Address)
	case u.Host == "" || u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "":
		return nil, fmt.Errorf("%q is not https://host[:port] (no user, path or query: the service's root is /redfish/v1)", b.Address)
	}
	u.Path = ""
	return u, nil
}

// Credentials reads the BMC's user name and password from their files.
func (b *BMC) Credentials() (user, password string, err error) {
	if user, err = ReadSecretFile(b.UsernameFile); err != nil {
		return "", "", fmt.Errorf("usernameFile: %w", err)
	}
	if password, err = ReadSecretFile(b.PasswordFile); err != nil {
		return "", "", fmt.Errorf("passwordFile: %w", err)
	}
	switch {
	case user == "":
		return "", "", fmt.Errorf("usernameFile: %s is empty", b.UsernameFile)
	case b.Protocol == BMCIPMI && len(user) > maxIPMIUsername:
		return "", "", fmt.Errorf("usernameFile: the user name in %s is longer than the %d bytes IPMI allows", b.UsernameFile, maxIPMIUsername)
	case b.Protocol == BMCIPMI && len(password) > maxIPMIPassword:
		return "", "", fmt.Errorf("passwordFile: the password in %s is longer than the %d bytes IPMI allows", b.PasswordFile, maxIPMIPassword)
	}
	return user, password, nil
}

// CertPool reads tls.caFile.
func (b *BMC) CertPool() (*x509.CertPool, error) { return ReadCertPool(b.TLS.CAFile) }

// ReadCertPool reads a file of PEM certificates, of at most 1 MiB.
func ReadCertPool(path string) (*x509.CertPool, error) {
	data, err := readBounded(path, 1<<20)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(data) {
		return nil, fmt.Errorf("%s holds no PEM certificate", path)
	}
	return pool, nil
}

// ReadSecretFile reads a credential from a file (a mounted Secret's key),
// without its trailing line break.
func ReadSecretFile(path string) (string, error) {
	data, err := readBounded(path, maxSecret)
	if err != nil {
		return "", err
	}
	return strings.TrimRight(string(data), "\r\n"), nil
}

// readBounded reads a regular file of at most limit bytes. Devices and
// pipes are refused before opening: opening a FIFO blocks.
func readBounded(path string, limit int64) ([]byte, error) {
	if st, err := os.Stat(path); err != nil {
		return nil, err
	} else if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%s is longer than %d bytes", path, limit)
	}
	return data, nil
}

// MissingSecretFiles warns of the BMC credential files that do not exist
// where the validate command runs (a pipeline, without the Secrets).
func (c *Config) MissingSecretFiles() []error {
	var warnings []error
	for i, m := range c.Inventory.Machines {
		if m.BMC == nil {
			continue
		}
		p := field.NewPath("inventory", "machines").Index(i).Child("bmc")
		for _, f := range []struct{ name, path string }{{"usernameFile", m.BMC.UsernameFile}, {"passwordFile", m.BMC.PasswordFile}, {"tls.caFile", m.BMC.TLS.CAFile}} {
			if f.path == "" {
				continue
			}
			if _, err := os.Stat(f.path); err != nil {
				warnings = append(warnings, fmt.Errorf("%s.%s: %s does not exist here; the CCM refuses the config unless it exists where it runs", p, f.name, f.path))
			}
		}
	}
	return warnings
}
