package bmc

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/config"
)

// A Redfish client of the few resources a power question needs (DMTF
// DSP0266, schema DSP8010): a session (SessionService/Sessions, login
// with POST, logout with DELETE, the X-Auth-Token on every request) and
// the ComputerSystem's PowerState. Every answer is bounded in size and
// time and read strictly: anything but a 2xx JSON answer whose PowerState
// is one of the schema's values is an error, so Unknown.

const (
	redfishRoot     = "/redfish/v1"
	redfishSystems  = redfishRoot + "/Systems"
	redfishSessions = redfishRoot + "/SessionService/Sessions"
)

type redfishConn struct {
	base   *url.URL
	http   *http.Client
	target Target
	system string // the ComputerSystem's path

	mu      sync.Mutex
	token   string
	session string // the session's path, for the logout
}

func dialRedfish(ctx context.Context, t Target) (Conn, error) {
	base, err := url.Parse(t.Address)
	if err != nil || base.Scheme != "https" || base.Host == "" {
		return nil, fmt.Errorf("Redfish address %q is not https://host[:port]", t.Address)
	}
	tlsConfig := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: t.InsecureSkipVerify} //nolint:gosec // only when the config says so
	if t.CAFile != "" {
		pool, err := config.ReadCertPool(t.CAFile)
		if err != nil {
			return nil, fmt.Errorf("reading tls.caFile: %w", err)
		}
		tlsConfig.RootCAs = pool
	}
	c := &redfishConn{base: base, target: t, http: &http.Client{
		Transport: &http.Transport{
			// Never through a proxy: the password goes to the BMC only.
			Proxy:                  nil,
			DialContext:            (&net.Dialer{}).DialContext,
			TLSClientConfig:        tlsConfig,
			MaxIdleConnsPerHost:    1,
			IdleConnTimeout:        90 * time.Second,
			ResponseHeaderTimeout:  0, // the question's context bounds it
			MaxResponseHeaderBytes: 64 << 10,
		},
		// A redirect could take the token elsewhere; it is an answer
		// like any other that is not the resource, so an error.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
	if err := c.login(ctx); err != nil {
		c.http.CloseIdleConnections()
		return nil, err
	}
	if c.system, err = c.findSystem(ctx); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// login opens a session (Redfish Session login) and keeps its token.
func (c *redfishConn) login(ctx context.Context) error {
	user, password, err := c.target.Credentials()
	if err != nil {
		return fmt.Errorf("reading the BMC's credentials: %w", err)
	}
	body, _ := json.Marshal(map[string]string{"UserName": user, "Password": password})
	res, err := c.do(ctx, http.MethodPost, redfishSessions, "", body)
	if err != nil {
		return fmt.Errorf("Redfish login: %w", err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusCreated && res.StatusCode != http.StatusOK {
		return fmt.Errorf("Redfish login: %s", statusError(res))
	}
	token := res.Header.Get("X-Auth-Token")
	if token == "" || len(token) > 4096 {
		return errors.New("Redfish login: the answer has no X-Auth-Token")
	}
	session := ""
	if loc := res.Header.Get("Location"); loc != "" {
		// Only a session of this service is logged out of later.
		if u, err := url.Parse(loc); err == nil && (u.Host == "" || u.Host == c.base.Host) && strings.HasPrefix(u.Path, redfishSessions+"/") {
			session = u.Path
		}
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, maxBody))
	c.mu.Lock()
	c.token, c.session = token, session
	c.mu.Unlock()
	return nil
}

// findSystem is the ComputerSystem asked about: the one named, or the
// only member of the Systems collection.
func (c *redfishConn) findSystem(ctx context.Context) (string, error) {
	if c.target.SystemID != "" {
		return redfishSystems + "/" + url.PathEscape(c.target.SystemID), nil
	}
	var coll struct {
		Members []struct {
			ID *string `json:"@odata.id"`
		} `json:"Members"`
	}
	if err := c.get(ctx, redfishSystems, &coll); err != nil {
		return "", err
	}
	if len(coll.Members) != 1 {
		return "", fmt.Errorf("Redfish %s has %d members: name the machine's with bmc.systemID", redfishSystems, len(coll.Members))
	}
	id := coll.Members[0].ID
	if id == nil || !strings.HasPrefix(*id, redfishSystems+"/") || strings.Contains(strings.TrimPrefix(*id, redfishSystems+"/"), "/") || strings.ContainsAny(*id, "?#") {
		return "", fmt.Errorf("Redfish %s: its member is not a ComputerSystem of it", redfishSystems)
	}
	return *id, nil
}

// Power reads the ComputerSystem's PowerState; a session that expired
// (401) is opened again once.
func (c *redfishConn) Power(ctx context.Context) (PowerState, error) {
	var system struct {
		PowerState *string `json:"PowerState"`
	}
	err := c.get(ctx, c.system, &system)
	var st *statusErr
	if errors.As(err, &st) && st.code == http.StatusUnauthorized {
		if err = c.login(ctx); err == nil {
			err = c.get(ctx, c.system, &system)
		}
	}
	if err != nil {
		return Unknown, err
	}
	if system.PowerState == nil {
		return Unknown, fmt.Errorf("Redfish %s has no PowerState", c.system)
	}
	switch *system.PowerState {
	case "Off":
		return Off, nil
	case "On", "PoweringOn", "PoweringOff", "Paused":
		// Not off yet: a machine powering off may still write to its disks.
		return On, nil
	}
	return Unknown, fmt.Errorf("Redfish %s: PowerState %q is not one of On, Off, PoweringOn, PoweringOff, Paused", c.system, truncate(*system.PowerState))
}

// get reads a resource into v: a 200 JSON answer of at most maxBody bytes.
func (c *redfishConn) get(ctx context.Context, path string, v any) error {
	c.mu.Lock()
	token := c.token
	c.mu.Unlock()
	res, err := c.do(ctx, http.MethodGet, path, token, nil)
	if err != nil {
		return fmt.Errorf("Redfish GET %s: %w", path, err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("Redfish GET %s: %w", path, statusError(res))
	}
	if mt, _, err := mime.ParseMediaType(res.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		return fmt.Errorf("Redfish GET %s: the answer is %q, not application/json", path, truncate(res.Header.Get("Content-Type")))
	}
	data, err := io.ReadAll(io.LimitReader(res.Body, maxBody+1))
	if err != nil {
		return fmt.Errorf("Redfish GET %s: reading the answer: %w", path, err)
	}
	if len(data) > maxBody {
		return fmt.Errorf("Redfish GET %s: the answer is longer than %d bytes", path, maxBody)
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("Redfish GET %s: the answer is not the resource's JSON: %w", path, err)
	}
	return nil
}

func (c *redfishConn) do(ctx context.Context, method, path, token string, body []byte) (*http.Response, error) {
	u := *c.base
	u.Path = path
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), r)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("OData-Version", "4.0")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("X-Auth-Token", token)
	}
	return c.http.Do(req)
}

// Close logs out (DELETE of the session), bounded, and drops the
// connections.
func (c *redfishConn) Close() {
	c.mu.Lock()
	token, session := c.token, c.session
	c.token, c.session = "", ""
	c.mu.Unlock()
	if session != "" {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if res, err := c.do(ctx, http.MethodDelete, session, token, nil); err == nil {
			_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, maxBody))
			res.Body.Close()
		}
		cancel()
	}
	c.http.CloseIdleConnections()
}

type statusErr struct {
	code   int
	status string
	where  string
}

func (e *statusErr) Error() string {
	if e.where != "" {
		return fmt.Sprintf("answered %s (redirected to %s)", e.status, e.where)
	}
	return "answered " + e.status
}

func statusError(res *http.Response) error {
	return &statusErr{code: res.StatusCode, status: truncate(res.Status), where: truncate(res.Header.Get("Location"))}
}

// truncate keeps what a BMC wrote short in messages.
func truncate(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}
