package config

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestBMCFields checks every rule of machines[].bmc, powerChecks and
// outOfService; each error names its field path.
func TestBMCFields(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	user, pass := write("user", "admin\n"), write("pass", "secret\n")
	longUser, longPass := write("longuser", strings.Repeat("u", 17)), write("longpass", strings.Repeat("p", 21))
	empty := write("empty", "\n")
	notPEM := write("ca", "not a certificate")
	bmc := func(fields string) string {
		return "inventory:\n  machines:\n  - name: a\n    bmc: {" + fields + "}\n"
	}
	creds := "usernameFile: " + user + ", passwordFile: " + pass
	tests := []struct {
		name string
		in   string
		want []string // empty: valid
	}{
		{"ipmi", bmc("protocol: ipmi, address: 192.0.2.10, " + creds), nil},
		{"ipmi with port and name", bmc("protocol: ipmi, address: \"bmc-a.example:6230\", " + creds), nil},
		{"ipmi IPv6 with port", bmc("protocol: ipmi, address: \"[2001:db8::10]:623\", " + creds), nil},
		{"redfish", bmc("protocol: redfish, address: \"https://192.0.2.10\", systemID: \"1\", " + creds), nil},
		{"redfish skipping verification when said", bmc("protocol: redfish, address: \"https://bmc.example:8443/\", tls: {insecureSkipVerify: true}, " + creds), nil},
		{"no protocol", bmc("address: 192.0.2.10, " + creds), []string{"inventory.machines[0].bmc.protocol: is required (ipmi or redfish)"}},
		{"unknown protocol", bmc("protocol: snmp, address: 192.0.2.10, " + creds), []string{`inventory.machines[0].bmc.protocol: "snmp" is not one of ipmi, redfish`}},
		{"ipmi bad port", bmc("protocol: ipmi, address: \"192.0.2.10:99999\", " + creds), []string{`inventory.machines[0].bmc.address: "192.0.2.10:99999": "99999" is not a port`}},
		{"ipmi bad host", bmc("protocol: ipmi, address: \"bmc_a!\", " + creds), []string{`inventory.machines[0].bmc.address: "bmc_a!" is neither an IP address nor a DNS name`}},
		{"ipmi without address", bmc("protocol: ipmi, " + creds), []string{"inventory.machines[0].bmc.address: is required"}},
		{"ipmi with Redfish fields", bmc("protocol: ipmi, address: 192.0.2.10, systemID: x, tls: {insecureSkipVerify: true}, " + creds),
			[]string{"inventory.machines[0].bmc.systemID: is for Redfish only", "inventory.machines[0].bmc.tls: is for Redfish only"}},
		{"redfish over http", bmc("protocol: redfish, address: \"http://192.0.2.10\", " + creds), []string{`inventory.machines[0].bmc.address: "http://192.0.2.10" is not an https:// URL`}},
		{"redfish with a path", bmc("protocol: redfish, address: \"https://192.0.2.10/redfish/v1\", " + creds), []string{"is not https://host[:port]"}},
		{"redfish with a user", bmc("protocol: redfish, address: \"https://root@192.0.2.10\", " + creds), []string{"is not https://host[:port]"}},
		{"redfish bad system", bmc("protocol: redfish, address: \"https://192.0.2.10\", systemID: \"../Managers/1\", " + creds), []string{`inventory.machines[0].bmc.systemID: "../Managers/1" is not a ComputerSystem Id`}},
		{"redfish CA and skip", bmc("protocol: redfish, address: \"https://192.0.2.10\", tls: {caFile: " + notPEM + ", insecureSkipVerify: true}, " + creds),
			[]string{"inventory.machines[0].bmc.tls: set caFile or insecureSkipVerify, not both"}},
		{"redfish CA not PEM", bmc("protocol: redfish, address: \"https://192.0.2.10\", tls: {caFile: " + notPEM + "}, " + creds),
			[]string{"inventory.machines[0].bmc.tls.caFile: " + notPEM + " holds no PEM certificate"}},
		{"no credential files", bmc("protocol: ipmi, address: 192.0.2.10"),
			[]string{"inventory.machines[0].bmc.usernameFile: is required", "inventory.machines[0].bmc.passwordFile: is required"}},
		{"inline password refused", bmc("protocol: ipmi, address: 192.0.2.10, password: x, " + creds), []string{"inventory.machines[0].bmc.password"}},
		{"missing credential file", bmc("protocol: ipmi, address: 192.0.2.10, usernameFile: " + user + ", passwordFile: /nonexistent/bmc/pass"),
			[]string{"inventory.machines[0].bmc: passwordFile: stat /nonexistent/bmc/pass: no such file or directory"}},
		{"empty user", bmc("protocol: ipmi, address: 192.0.2.10, usernameFile: " + empty + ", passwordFile: " + pass), []string{"inventory.machines[0].bmc: usernameFile: " + empty + " is empty"}},
		{"IPMI lengths", bmc("protocol: ipmi, address: 192.0.2.10, usernameFile: " + longUser + ", passwordFile: " + pass),
			[]string{"longer than the 16 bytes IPMI allows"}},
		{"IPMI password length", bmc("protocol: ipmi, address: 192.0.2.10, usernameFile: " + user + ", passwordFile: " + longPass),
			[]string{"longer than the 20 bytes IPMI allows"}},
		{"redfish takes a long password", bmc("protocol: redfish, address: \"https://192.0.2.10\", usernameFile: " + user + ", passwordFile: " + longPass), nil},
		{"a device as a credential", bmc("protocol: ipmi, address: 192.0.2.10, usernameFile: /dev/zero, passwordFile: " + pass), []string{"/dev/zero is not a regular file"}},
		{"power checks", "inventory:\n  powerChecks: {interval: 500ms, backgroundInterval: 100ms, timeout: 10s, concurrency: 0}\n",
			[]string{"inventory.powerChecks.interval: 500ms is shorter than 1s", "inventory.powerChecks.backgroundInterval: 100ms is shorter than interval (500ms)",
				"inventory.powerChecks.timeout: 10s is not between 100ms and interval (500ms)"}},
		{"power check workers", "inventory:\n  powerChecks: {concurrency: 1000}\n", []string{"inventory.powerChecks.concurrency: 1000 is not between 1 and 256"}},
		{"grace", "inventory:\n  outOfService: {enabled: true, gracePeriod: -1s}\n", []string{"inventory.outOfService.gracePeriod: -1s is negative"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { parsesAs(t, tt.in, tt.want) })
	}
}

func TestBMCDefaults(t *testing.T) {
	cfg, err := Parse([]byte("inventory:\n  machines: [{name: a}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	pc, oos := cfg.Inventory.PowerChecks, cfg.Inventory.OutOfService
	if pc.Interval.Duration != 10*time.Second || pc.BackgroundInterval.Duration != 10*time.Minute || pc.Timeout.Duration != 5*time.Second || pc.Concurrency != 16 {
		t.Errorf("powerChecks defaults %+v", pc)
	}
	if oos.Enabled || oos.GracePeriod.Duration != time.Minute {
		t.Errorf("outOfService defaults %+v", oos)
	}
}

// TestMissingCredentialFilesWarnOffline: where the Secrets are not (a
// pipeline), a missing credential file is a warning, not a refusal.
func TestMissingCredentialFilesWarnOffline(t *testing.T) {
	in := "inventory:\n  machines:\n  - name: a\n    bmc: {protocol: ipmi, address: 192.0.2.10, usernameFile: /nonexistent/u, passwordFile: /nonexistent/p}\n"
	cfg, err := ParseWithoutSecrets([]byte(in))
	if err != nil {
		t.Fatalf("refused offline: %v", err)
	}
	var got []string
	for _, w := range cfg.MissingSecretFiles() {
		got = append(got, w.Error())
	}
	want := []string{
		"inventory.machines[0].bmc.usernameFile: /nonexistent/u does not exist here; the CCM refuses the config unless it exists where it runs",
		"inventory.machines[0].bmc.passwordFile: /nonexistent/p does not exist here; the CCM refuses the config unless it exists where it runs",
	}
	if !slices.Equal(got, want) {
		t.Errorf("warnings %q, want %q", got, want)
	}
	if _, err := Parse([]byte(in)); err == nil {
		t.Error("the CCM's own load accepts a missing credential file")
	}
}
