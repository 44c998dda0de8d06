// kcluster: a Kubernetes control plane for preflight's tests, from the released Go modules
// (k8s.io/kubernetes and go.etcd.io/etcd/server/v3 at the versions in go.mod).
//
// One binary, so that the shared dependencies compile once:
//
//	kcluster up DIR            make certificates and kubeconfigs under DIR, start etcd
//	                           (embedded), then kube-apiserver, kube-controller-manager and
//	                           kube-scheduler (this binary again, one process each), all on
//	                           127.0.0.1; write DIR/admin.kubeconfig and DIR/ready; run until
//	                           SIGTERM/SIGINT, then stop them all.
//	kcluster kube-apiserver ARGS...           the real kube-apiserver command
//	kcluster kube-controller-manager ARGS...  the real kube-controller-manager command
//	kcluster kube-scheduler ARGS...           the real kube-scheduler command
//	kcluster node-agent ARGS...               the test node agent (nodeagent.go)
//
// Each component runs in its own process because each keeps process-wide state (flags,
// metrics registries, feature gates) that the upstream commands expect to own.
package main

import (
	"fmt"
	"os"

	apiserver "k8s.io/kubernetes/cmd/kube-apiserver/app"
	kcm "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	scheduler "k8s.io/kubernetes/cmd/kube-scheduler/app"
)

func usage() {
	fmt.Fprintln(os.Stderr, "usage: kcluster up DIR | kube-apiserver ARGS | kube-controller-manager ARGS | kube-scheduler ARGS | node-agent ARGS")
	os.Exit(2)
}

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	args := os.Args[2:]
	switch os.Args[1] {
	case "up":
		if len(args) != 1 {
			usage()
		}
		if err := up(args[0]); err != nil {
			fmt.Fprintln(os.Stderr, "kcluster up:", err)
			os.Exit(1)
		}
	case "kube-apiserver":
		cmd := apiserver.NewAPIServerCommand()
		cmd.SetArgs(args)
		if err := cmd.Execute(); err != nil {
			os.Exit(1)
		}
	case "kube-controller-manager":
		cmd := kcm.NewControllerManagerCommand()
		cmd.SetArgs(args)
		if err := cmd.Execute(); err != nil {
			os.Exit(1)
		}
	case "kube-scheduler":
		cmd := scheduler.NewSchedulerCommand()
		cmd.SetArgs(args)
		if err := cmd.Execute(); err != nil {
			os.Exit(1)
		}
	case "node-agent":
		if err := nodeAgent(args); err != nil {
			fmt.Fprintln(os.Stderr, "node-agent:", err)
			os.Exit(1)
		}
	default:
		usage()
	}
}
