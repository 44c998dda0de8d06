package main

// The test node agent: it plays the kubelet for the pods the real scheduler binds to its
// fake Nodes. No container runtime can run here, so for each pod it runs a command of the
// test's (--exec) in place of the pod's preflight container, with the environment the pod
// spec gives that container (value, fieldRef, secretKeyRef, configMapKeyRef, envFrom,
// JOB_COMPLETION_INDEX as the Job controller adds it) and its downward-API volume files
// written under $PF_POD_ROOT<mountPath>, and writes what the command did into the pod's
// status as the kubelet would: the exit code and the termination message (the file
// $PF_TERMINATION_LOG, else the output's tail as FallbackToLogsOnError does) in
// status.initContainerStatuses (or containerStatuses when preflight is a main container),
// the phase Failed on a failure (restartPolicy Never), else the main containers running and,
// with --main-exit, terminated with that code. A pod being deleted is removed at once (grace
// 0), as the kubelet does once its containers are gone.

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

type agent struct {
	cs       *kubernetes.Clientset
	nodes    map[string]bool
	exec     string
	mainExit int
	dir      string
	mu       sync.Mutex
	seen     map[types.UID]bool
}

func nodeAgent(args []string) error {
	fs := flag.NewFlagSet("node-agent", flag.ContinueOnError)
	kc := fs.String("kubeconfig", "", "kubeconfig")
	nodes := fs.String("nodes", "", "comma-separated Node names to create and serve")
	gpus := fs.Int("gpus", 8, "nvidia.com/gpu capacity of each node")
	ex := fs.String("exec", "", "command (sh -c) run in place of the preflight container")
	mainExit := fs.Int("main-exit", -1, "exit code the main containers terminate with (-1: keep running)")
	dir := fs.String("dir", "", "working folder (per-pod roots)")
	labels := fs.String("labels", "", "more node labels, k=v,...")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *kc == "" || *nodes == "" || *ex == "" || *dir == "" {
		return fmt.Errorf("--kubeconfig, --nodes, --exec and --dir are required")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", *kc)
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = 100, 200
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	a := &agent{cs: cs, nodes: map[string]bool{}, exec: *ex, mainExit: *mainExit, dir: *dir, seen: map[types.UID]bool{}}
	ctx := context.Background()
	names := strings.Split(*nodes, ",")
	for _, n := range names {
		a.nodes[n] = true
		if err := a.makeNode(ctx, n, *gpus, *labels); err != nil {
			return fmt.Errorf("node %s: %w", n, err)
		}
	}
	go a.heartbeat(ctx, names)
	// kube-apiserver's TaintNodesByCondition admission plugin gives every new Node the taint
	// node.kubernetes.io/not-ready:NoSchedule; the node lifecycle controller of
	// kube-controller-manager lifts it once the Node's Ready condition is True
	// (doNoScheduleTaintingPass). Until then the scheduler places nothing here: serve
	// once it has.
	for deadline := time.Now().Add(120 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		left := []string{}
		for _, n := range names {
			node, err := cs.CoreV1().Nodes().Get(ctx, n, metav1.GetOptions{})
			if err != nil {
				left = append(left, n)
				continue
			}
			for _, t := range node.Spec.Taints {
				if t.Key == corev1.TaintNodeNotReady {
					left = append(left, n)
					break
				}
			}
		}
		if len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("nodes %v still tainted %s after 120 s: is kube-controller-manager's node lifecycle controller running?", left, corev1.TaintNodeNotReady)
		}
	}
	fmt.Println("node-agent: serving", *nodes)
	for {
		pods, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
		if err != nil {
			fmt.Fprintln(os.Stderr, "node-agent: list pods:", err)
			time.Sleep(time.Second)
			continue
		}
		for i := range pods.Items {
			p := pods.Items[i]
			if !a.nodes[p.Spec.NodeName] {
				continue
			}
			if p.DeletionTimestamp != nil {
				zero := int64(0)
				_ = cs.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
				continue
			}
			a.mu.Lock()
			if a.seen[p.UID] || p.Status.Phase != corev1.PodPending {
				a.mu.Unlock()
				continue
			}
			a.seen[p.UID] = true
			a.mu.Unlock()
			go a.runPod(ctx, p.DeepCopy())
		}
		time.Sleep(300 * time.Millisecond)
	}
}

func (a *agent) makeNode(ctx context.Context, name string, gpus int, labels string) error {
	_ = a.cs.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{})
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("64"),
		corev1.ResourceMemory: resource.MustParse("512Gi"),
		corev1.ResourcePods:   resource.MustParse("110"),
		"nvidia.com/gpu":      *resource.NewQuantity(int64(gpus), resource.DecimalSI),
	}
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
		"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "preflight.dev/test-node": "true"}}}
	for _, kv := range strings.Split(labels, ",") {
		if k, v, ok := strings.Cut(kv, "="); ok {
			n.Labels[k] = v
		}
	}
	if _, err := a.cs.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
		return err
	}
	// the controllers write the new Node too (the TTL controller's annotation, the node
	// lifecycle controller's taints): read it back and retry on a conflict
	var err error
	for i := 0; i < 50; i++ {
		var cur *corev1.Node
		if cur, err = a.cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{}); err != nil {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		now := metav1.Now()
		cur.Status = corev1.NodeStatus{
			Capacity: capacity, Allocatable: capacity,
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue,
				Reason: "KubeletReady", Message: "test node agent", LastHeartbeatTime: now, LastTransitionTime: now}},
			Addresses: []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: name}},
		}
		if _, err = a.cs.CoreV1().Nodes().UpdateStatus(ctx, cur, metav1.UpdateOptions{}); err == nil {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return err
}

// heartbeat renews each Node's Lease in kube-node-lease every 10 s, as the kubelet does
// (k8s.io/kubernetes pkg/kubelet/kubelet.go: NodeLeaseDurationSeconds 40, renewed at
// nodeLeaseRenewIntervalFraction 0.25 of it): the node
// lifecycle controller counts a Node whose Lease and status both go stale for
// --node-monitor-grace-period (50 s) as NotReady and taints it.
func (a *agent) heartbeat(ctx context.Context, names []string) {
	holder := func(s string) *string { return &s }
	dur := int32(40)
	for {
		now := metav1.NewMicroTime(time.Now())
		for _, n := range names {
			leases := a.cs.CoordinationV1().Leases(corev1.NamespaceNodeLease)
			l, err := leases.Get(ctx, n, metav1.GetOptions{})
			if err != nil {
				l = &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: n, Namespace: corev1.NamespaceNodeLease},
					Spec: coordinationv1.LeaseSpec{HolderIdentity: holder(n), LeaseDurationSeconds: &dur, RenewTime: &now}}
				if node, err := a.cs.CoreV1().Nodes().Get(ctx, n, metav1.GetOptions{}); err == nil {
					l.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: n, UID: node.UID}}
				}
				if _, err := leases.Create(ctx, l, metav1.CreateOptions{}); err != nil {
					fmt.Fprintln(os.Stderr, "node-agent: lease", n, err)
				}
				continue
			}
			l.Spec.RenewTime = &now
			if _, err := leases.Update(ctx, l, metav1.UpdateOptions{}); err != nil {
				fmt.Fprintln(os.Stderr, "node-agent: lease", n, err)
			}
		}
		time.Sleep(10 * time.Second)
	}
}

// fieldRef resolves a downward-API field path as the kubelet does (pkg/fieldpath).
func fieldRef(p *corev1.Pod, path string) string {
	switch path {
	case "metadata.name":
		return p.Name
	case "metadata.namespace":
		return p.Namespace
	case "metadata.uid":
		return string(p.UID)
	case "spec.nodeName":
		return p.Spec.NodeName
	case "spec.serviceAccountName":
		return p.Spec.ServiceAccountName
	case "status.podIP":
		return p.Status.PodIP
	case "metadata.labels", "metadata.annotations":
		m := p.Labels
		if path == "metadata.annotations" {
			m = p.Annotations
		}
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var b strings.Builder
		for _, k := range keys {
			fmt.Fprintf(&b, "%s=%s\n", k, strconv.Quote(m[k]))
		}
		return b.String()
	}
	for _, pre := range []string{"metadata.labels['", "metadata.annotations['"} {
		if strings.HasPrefix(path, pre) && strings.HasSuffix(path, "']") {
			k := path[len(pre) : len(path)-2]
			if strings.HasPrefix(pre, "metadata.labels") {
				return p.Labels[k]
			}
			return p.Annotations[k]
		}
	}
	return ""
}

func (a *agent) env(ctx context.Context, p *corev1.Pod, c *corev1.Container) []string {
	out := []string{}
	add := func(k, v string) { out = append(out, k+"="+v) }
	for _, ef := range c.EnvFrom {
		if ef.ConfigMapRef != nil {
			if cm, err := a.cs.CoreV1().ConfigMaps(p.Namespace).Get(ctx, ef.ConfigMapRef.Name, metav1.GetOptions{}); err == nil {
				for k, v := range cm.Data {
					add(ef.Prefix+k, v)
				}
			}
		}
		if ef.SecretRef != nil {
			if s, err := a.cs.CoreV1().Secrets(p.Namespace).Get(ctx, ef.SecretRef.Name, metav1.GetOptions{}); err == nil {
				for k, v := range s.Data {
					add(ef.Prefix+k, string(v))
				}
			}
		}
	}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			add(e.Name, e.Value)
		case e.ValueFrom.FieldRef != nil:
			add(e.Name, fieldRef(p, e.ValueFrom.FieldRef.FieldPath))
		case e.ValueFrom.SecretKeyRef != nil:
			if s, err := a.cs.CoreV1().Secrets(p.Namespace).Get(ctx, e.ValueFrom.SecretKeyRef.Name, metav1.GetOptions{}); err == nil {
				add(e.Name, string(s.Data[e.ValueFrom.SecretKeyRef.Key]))
			}
		case e.ValueFrom.ConfigMapKeyRef != nil:
			if cm, err := a.cs.CoreV1().ConfigMaps(p.Namespace).Get(ctx, e.ValueFrom.ConfigMapKeyRef.Name, metav1.GetOptions{}); err == nil {
				add(e.Name, cm.Data[e.ValueFrom.ConfigMapKeyRef.Key])
			}
		}
	}
	return out
}

// downward writes the downward-API volumes c mounts under root<mountPath>.
func downward(root string, p *corev1.Pod, c *corev1.Container) {
	for _, m := range c.VolumeMounts {
		for _, v := range p.Spec.Volumes {
			if v.Name != m.Name || v.DownwardAPI == nil {
				continue
			}
			for _, it := range v.DownwardAPI.Items {
				if it.FieldRef == nil {
					continue
				}
				f := filepath.Join(root, m.MountPath, it.Path)
				_ = os.MkdirAll(filepath.Dir(f), 0o755)
				_ = os.WriteFile(f, []byte(fieldRef(p, it.FieldRef.FieldPath)), 0o644)
			}
		}
	}
}

func (a *agent) updateStatus(ctx context.Context, p *corev1.Pod, mut func(*corev1.Pod)) {
	for i := 0; i < 20; i++ {
		cur, err := a.cs.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
		if err != nil || cur.UID != p.UID {
			return
		}
		mut(cur)
		if _, err = a.cs.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, cur, metav1.UpdateOptions{}); err == nil {
			*p = *cur
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func cond(t corev1.PodConditionType, ok bool) corev1.PodCondition {
	s := corev1.ConditionFalse
	if ok {
		s = corev1.ConditionTrue
	}
	return corev1.PodCondition{Type: t, Status: s, LastTransitionTime: metav1.Now()}
}

func waiting(cs []corev1.Container) []corev1.ContainerStatus {
	var out []corev1.ContainerStatus
	for _, c := range cs {
		out = append(out, corev1.ContainerStatus{Name: c.Name, Image: c.Image,
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "PodInitializing"}}})
	}
	return out
}

func (a *agent) runPod(ctx context.Context, p *corev1.Pod) {
	// which container is preflight: the init container named so, else the main one
	var pf *corev1.Container
	inInit := false
	for i := range p.Spec.InitContainers {
		if p.Spec.InitContainers[i].Name == "preflight" {
			pf, inInit = &p.Spec.InitContainers[i], true
		}
	}
	if pf == nil {
		for i := range p.Spec.Containers {
			if p.Spec.Containers[i].Name == "preflight" {
				pf = &p.Spec.Containers[i]
			}
		}
	}
	a.mu.Lock()
	n := len(a.seen)
	a.mu.Unlock()
	ip := fmt.Sprintf("10.244.%d.%d", (n/240)%250, 10+n%240)
	start := metav1.Now()
	a.updateStatus(ctx, p, func(c *corev1.Pod) {
		c.Status.Phase = corev1.PodPending
		c.Status.StartTime = &start
		c.Status.PodIP, c.Status.HostIP = ip, "127.0.0.1"
		c.Status.PodIPs = []corev1.PodIP{{IP: ip}}
		c.Status.Conditions = []corev1.PodCondition{cond(corev1.PodScheduled, true), cond(corev1.PodInitialized, false), cond(corev1.PodReady, false)}
		c.Status.ContainerStatuses = waiting(c.Spec.Containers)
		if inInit {
			c.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: pf.Name, Image: pf.Image,
				State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: start}}}}
		}
	})
	code, msg := 0, ""
	if pf != nil {
		root := filepath.Join(a.dir, string(p.UID))
		_ = os.MkdirAll(root, 0o755)
		downward(root, p, pf)
		term := filepath.Join(root, "termination-log")
		cmd := exec.Command("sh", "-c", a.exec)
		cmd.Env = append(append(os.Environ(), a.env(ctx, p, pf)...),
			"PF_POD_ROOT="+root, "PF_TERMINATION_LOG="+term, "PF_POD_IP="+ip)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		_ = os.WriteFile(filepath.Join(root, "log"), out.Bytes(), 0o644)
		if err != nil {
			code = 1
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			}
		}
		if b, err := os.ReadFile(term); err == nil && len(b) > 0 {
			msg = string(b)
		} else if code != 0 && pf.TerminationMessagePolicy == corev1.TerminationMessageFallbackToLogsOnError {
			o := out.String()
			if len(o) > 2048 {
				o = o[len(o)-2048:]
			}
			msg = o
		}
	}
	fin := metav1.Now()
	terminated := func(name, image string, code int, msg string) corev1.ContainerStatus {
		reason := "Completed"
		if code != 0 {
			reason = "Error"
		}
		return corev1.ContainerStatus{Name: name, Image: image, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
			ExitCode: int32(code), Reason: reason, Message: msg, StartedAt: start, FinishedAt: fin}}}
	}
	a.updateStatus(ctx, p, func(c *corev1.Pod) {
		if inInit {
			c.Status.InitContainerStatuses = []corev1.ContainerStatus{terminated(pf.Name, pf.Image, code, msg)}
			if code != 0 {
				c.Status.Phase = corev1.PodFailed
				c.Status.Conditions = []corev1.PodCondition{cond(corev1.PodScheduled, true), cond(corev1.PodInitialized, false), cond(corev1.PodReady, false)}
				return
			}
		} else if pf != nil && code != 0 {
			c.Status.Phase = corev1.PodFailed
			c.Status.ContainerStatuses = []corev1.ContainerStatus{terminated(pf.Name, pf.Image, code, msg)}
			return
		}
		var st []corev1.ContainerStatus
		for _, k := range c.Spec.Containers {
			if pf != nil && !inInit && k.Name == pf.Name {
				st = append(st, terminated(k.Name, k.Image, code, msg))
				continue
			}
			if a.mainExit >= 0 {
				st = append(st, terminated(k.Name, k.Image, a.mainExit, ""))
			} else {
				r := true
				st = append(st, corev1.ContainerStatus{Name: k.Name, Image: k.Image, Ready: true, Started: &r,
					State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: fin}}})
			}
		}
		c.Status.ContainerStatuses = st
		switch {
		case a.mainExit < 0 && (inInit || pf == nil):
			c.Status.Phase = corev1.PodRunning
			c.Status.Conditions = []corev1.PodCondition{cond(corev1.PodScheduled, true), cond(corev1.PodInitialized, true), cond(corev1.PodReady, true)}
		case a.mainExit > 0:
			c.Status.Phase = corev1.PodFailed
		default:
			c.Status.Phase = corev1.PodSucceeded
		}
	})
}
