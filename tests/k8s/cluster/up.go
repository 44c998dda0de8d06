package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
)

type ca struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

func writePEM(path, typ string, der []byte) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600)
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	return n
}

func newCA(dir string) (*ca, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(), Subject: pkix.Name{CommonName: "preflight-test-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(48 * time.Hour),
		IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, _ := x509.ParseCertificate(der)
	kd, _ := x509.MarshalECPrivateKey(key)
	if err := writePEM(filepath.Join(dir, "ca.crt"), "CERTIFICATE", der); err != nil {
		return nil, err
	}
	if err := writePEM(filepath.Join(dir, "ca.key"), "EC PRIVATE KEY", kd); err != nil {
		return nil, err
	}
	return &ca{cert, key}, nil
}

// issue writes NAME.crt and NAME.key: a server certificate for 127.0.0.1/localhost when
// server, else a client certificate for CN/O (how kube-apiserver's x509 authenticator
// reads a user: CN the name, O the groups).
func (c *ca) issue(dir, name, cn string, orgs []string, server bool) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(), Subject: pkix.Name{CommonName: cn, Organization: orgs},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(48 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
	}
	if server {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		tmpl.IPAddresses = []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("10.96.0.1")}
		tmpl.DNSNames = []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"}
	} else {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, c.cert, &key.PublicKey, c.key)
	if err != nil {
		return err
	}
	kd, _ := x509.MarshalECPrivateKey(key)
	if err := writePEM(filepath.Join(dir, name+".crt"), "CERTIFICATE", der); err != nil {
		return err
	}
	return writePEM(filepath.Join(dir, name+".key"), "EC PRIVATE KEY", kd)
}

func kubeconfig(dir, name, server string) error {
	s := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: test
  cluster:
    server: %s
    certificate-authority: %s
users:
- name: %s
  user:
    client-certificate: %s
    client-key: %s
contexts:
- name: test
  context: {cluster: test, user: %s}
current-context: test
`, server, filepath.Join(dir, "ca.crt"), name, filepath.Join(dir, name+".crt"),
		filepath.Join(dir, name+".key"), name)
	return os.WriteFile(filepath.Join(dir, name+".kubeconfig"), []byte(s), 0o600)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func up(dir string) error {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	c, err := newCA(dir)
	if err != nil {
		return err
	}
	if err := c.issue(dir, "apiserver", "kube-apiserver", nil, true); err != nil {
		return err
	}
	for _, u := range []struct{ name, cn, org string }{
		{"admin", "preflight-test-admin", "system:masters"},
		{"controller-manager", "system:kube-controller-manager", ""},
		{"scheduler", "system:kube-scheduler", ""},
	} {
		var orgs []string
		if u.org != "" {
			orgs = []string{u.org}
		}
		if err := c.issue(dir, u.name, u.cn, orgs, false); err != nil {
			return err
		}
	}
	sa, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return err
	}
	if err := writePEM(filepath.Join(dir, "sa.key"), "RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(sa)); err != nil {
		return err
	}
	pub, _ := x509.MarshalPKIXPublicKey(&sa.PublicKey)
	if err := writePEM(filepath.Join(dir, "sa.pub"), "PUBLIC KEY", pub); err != nil {
		return err
	}

	// etcd, embedded, on loopback ports of its own
	cport, err := freePort()
	if err != nil {
		return err
	}
	pport, err := freePort()
	if err != nil {
		return err
	}
	cfg := embed.NewConfig()
	cfg.Dir = filepath.Join(dir, "etcd")
	cfg.Logger = "zap"
	cfg.LogLevel = "error"
	cfg.LogOutputs = []string{filepath.Join(dir, "etcd.log")}
	curl, _ := url.Parse("http://127.0.0.1:" + strconv.Itoa(cport))
	purl, _ := url.Parse("http://127.0.0.1:" + strconv.Itoa(pport))
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{*curl}, []url.URL{*curl}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{*purl}, []url.URL{*purl}
	cfg.InitialCluster = cfg.Name + "=" + purl.String()
	cfg.UnsafeNoFsync = true // a test's etcd: nothing outlives it
	etcd, err := embed.StartEtcd(cfg)
	if err != nil {
		return fmt.Errorf("etcd: %w", err)
	}
	defer etcd.Close()
	select {
	case <-etcd.Server.ReadyNotify():
	case <-time.After(60 * time.Second):
		return fmt.Errorf("etcd not ready after 60 s")
	}

	aport, err := freePort()
	if err != nil {
		return err
	}
	server := "https://127.0.0.1:" + strconv.Itoa(aport)
	for _, n := range []string{"admin", "controller-manager", "scheduler"} {
		if err := kubeconfig(dir, n, server); err != nil {
			return err
		}
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	type proc struct {
		cmd  *exec.Cmd
		done chan struct{}
	}
	var procs []proc
	stop := func() {
		for i := len(procs) - 1; i >= 0; i-- {
			_ = procs[i].cmd.Process.Signal(syscall.SIGTERM)
		}
		for i := len(procs) - 1; i >= 0; i-- {
			select {
			case <-procs[i].done:
			case <-time.After(10 * time.Second):
				_ = procs[i].cmd.Process.Kill()
				<-procs[i].done
			}
		}
	}
	exited := func(i int) bool {
		select {
		case <-procs[i].done:
			return true
		default:
			return false
		}
	}
	start := func(name string, args ...string) error {
		log, err := os.Create(filepath.Join(dir, name+".log"))
		if err != nil {
			return err
		}
		cmd := exec.Command(self, append([]string{name}, args...)...)
		cmd.Stdout, cmd.Stderr = log, log
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			return err
		}
		p := proc{cmd, make(chan struct{})}
		go func() { _ = cmd.Wait(); close(p.done) }()
		procs = append(procs, p)
		return nil
	}
	f := func(n string) string { return filepath.Join(dir, n) }
	if err := start("kube-apiserver",
		"--etcd-servers="+curl.String(),
		"--bind-address=127.0.0.1", "--advertise-address=127.0.0.1",
		"--secure-port="+strconv.Itoa(aport),
		"--cert-dir="+f("apiserver-certs"),
		"--tls-cert-file="+f("apiserver.crt"), "--tls-private-key-file="+f("apiserver.key"),
		"--client-ca-file="+f("ca.crt"),
		"--service-account-key-file="+f("sa.pub"),
		"--service-account-signing-key-file="+f("sa.key"),
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--api-audiences=https://kubernetes.default.svc.cluster.local",
		"--authorization-mode=Node,RBAC",
		// PodSecurity and ValidatingAdmissionPolicy are in the default set; named so
		// that a change of defaults cannot turn them off unseen
		"--enable-admission-plugins=NodeRestriction,PodSecurity,ValidatingAdmissionPolicy",
		"--runtime-config=resource.k8s.io/v1=true",
		"--service-cluster-ip-range=10.96.0.0/16",
		"--allow-privileged=true",
		"--enable-priority-and-fairness=false",
		"--profiling=false",
		"--endpoint-reconciler-type=none",
		"--v=1"); err != nil {
		stop()
		return err
	}
	// ready when /readyz answers ok to the admin identity
	adminCert, err := tls.LoadX509KeyPair(f("admin.crt"), f("admin.key"))
	if err != nil {
		stop()
		return err
	}
	pool := x509.NewCertPool()
	pool.AddCert(c.cert)
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{
		RootCAs: pool, Certificates: []tls.Certificate{adminCert}}}}
	ready := false
	for deadline := time.Now().Add(180 * time.Second); time.Now().Before(deadline); time.Sleep(250 * time.Millisecond) {
		if exited(0) {
			break
		}
		r, err := hc.Get(server + "/readyz")
		if err == nil {
			r.Body.Close()
			if r.StatusCode == 200 {
				ready = true
				break
			}
		}
	}
	if !ready {
		stop()
		return fmt.Errorf("kube-apiserver not ready in 180 s (see %s)", f("kube-apiserver.log"))
	}
	if err := start("kube-controller-manager",
		"--kubeconfig="+f("controller-manager.kubeconfig"),
		"--authentication-kubeconfig="+f("controller-manager.kubeconfig"),
		"--authorization-kubeconfig="+f("controller-manager.kubeconfig"),
		"--bind-address=127.0.0.1", "--secure-port=0",
		"--leader-elect=false",
		"--use-service-account-credentials=true",
		"--service-account-private-key-file="+f("sa.key"),
		"--root-ca-file="+f("ca.crt"),
		"--cluster-signing-cert-file="+f("ca.crt"), "--cluster-signing-key-file="+f("ca.key"),
		// all of them, the node lifecycle controller too: it lifts the not-ready taint
		// kube-apiserver puts on every new Node once the Node reports Ready, and keeps the
		// test node agent's Nodes Ready while their Leases are renewed
		"--controllers=*",
		"--concurrent-job-syncs=5",
		"--v=1"); err != nil {
		stop()
		return err
	}
	if err := start("kube-scheduler",
		"--kubeconfig="+f("scheduler.kubeconfig"),
		"--authentication-kubeconfig="+f("scheduler.kubeconfig"),
		"--authorization-kubeconfig="+f("scheduler.kubeconfig"),
		"--bind-address=127.0.0.1", "--secure-port=0",
		"--leader-elect=false",
		"--v=1"); err != nil {
		stop()
		return err
	}
	if err := os.WriteFile(f("ready"), []byte(server+"\n"), 0o644); err != nil {
		stop()
		return err
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	died := make(chan int, len(procs))
	for i := range procs {
		go func(i int) { <-procs[i].done; died <- i }(i)
	}
	select {
	case <-sig:
		stop()
		return nil
	case i := <-died:
		stop()
		return fmt.Errorf("%s exited (see %s)", procs[i].cmd.Args[1], f(procs[i].cmd.Args[1]+".log"))
	}
}
