//! The columns each built-in kind prints (the printers' `*ColumnDefinitions`), between Name and
//! the rest.

use crate::resources::ResourceType;

/// One extra column: name, type, priority (1 = only with `-o wide`), description.
type Column = (&'static str, &'static str, u8, &'static str);

/// The columns between Name and the rest, and each row's cells for them, per kind. Age sits
/// where the printer puts it; `None` for kinds printed as NAME / AGE.
pub(super) fn columns(res: &ResourceType) -> Option<&'static [Column]> {
    const AGE: Column = (
        "Age",
        "string",
        0,
        "CreationTimestamp is a timestamp representing the server time when this object was created.",
    );
    // Every workload kind's wide columns name its pod template's containers and images.
    const CONTAINERS: Column = (
        "Containers",
        "string",
        1,
        "Names of each container in the template.",
    );
    const IMAGES: Column = (
        "Images",
        "string",
        1,
        "Images referenced by each container in the template.",
    );
    Some(match (res.group.as_str(), res.kind.as_str()) {
        ("", "ConfigMap") => &[
            ("Data", "string", 0, "Data contains the configuration data."),
            AGE,
        ],
        ("", "Secret") => &[
            ("Type", "string", 0, "The type of secret"),
            ("Data", "string", 0, "Data contains the secret data."),
            AGE,
        ],
        ("", "Namespace") => &[("Status", "string", 0, "The status of the namespace"), AGE],
        ("", "ServiceAccount") => &[
            (
                "Secrets",
                "string",
                0,
                "Secrets is a list of the secrets in the same namespace that pods running using this ServiceAccount are allowed to use.",
            ),
            AGE,
        ],
        ("", "Service") => &[
            ("Type", "string", 0, "The type of service."),
            ("Cluster-IP", "string", 0, "The cluster IP of the service."),
            (
                "External-IP",
                "string",
                0,
                "The external IP of the service.",
            ),
            ("Port(s)", "string", 0, "The ports of the service."),
            AGE,
            (
                "Selector",
                "string",
                1,
                "Route service traffic to pods with label keys and values matching this selector.",
            ),
        ],
        ("", "Pod") => &[
            (
                "Ready",
                "string",
                0,
                "The aggregate readiness state of this pod for accepting traffic.",
            ),
            (
                "Status",
                "string",
                0,
                "The aggregate status of the containers in this pod.",
            ),
            (
                "Restarts",
                "string",
                0,
                "The number of times the containers in this pod have been restarted and when the last container in this pod has restarted.",
            ),
            AGE,
            (
                "IP",
                "string",
                1,
                "IP address allocated to the pod. Routable at least within the cluster. Empty if not yet allocated.",
            ),
            (
                "Node",
                "string",
                1,
                "NodeName is a request to schedule this pod onto a specific node.",
            ),
        ],
        ("apps", "Deployment") => &[
            ("Ready", "string", 0, "Number of the pod with ready state"),
            (
                "Up-to-date",
                "string",
                0,
                "Total number of non-terminated pods targeted by this deployment that have the desired template spec.",
            ),
            (
                "Available",
                "string",
                0,
                "Total number of available pods (ready for at least minReadySeconds) targeted by this deployment.",
            ),
            AGE,
            CONTAINERS,
            IMAGES,
            (
                "Selector",
                "string",
                1,
                "Label selector for pods. Existing ReplicaSets whose pods are selected by this will be the ones affected by this deployment.",
            ),
        ],
        ("apps", "ReplicaSet") => &[
            (
                "Desired",
                "integer",
                0,
                "Replicas is the number of desired replicas.",
            ),
            (
                "Current",
                "integer",
                0,
                "Replicas is the most recently observed number of replicas.",
            ),
            (
                "Ready",
                "integer",
                0,
                "The number of ready replicas for this replica set.",
            ),
            AGE,
            CONTAINERS,
            IMAGES,
            (
                "Selector",
                "string",
                1,
                "Selector is a label query over pods that should match the replica count.",
            ),
        ],
        ("apps", "StatefulSet") => &[
            ("Ready", "string", 0, "Number of the pod with ready state"),
            AGE,
            CONTAINERS,
            IMAGES,
        ],
        ("apps", "DaemonSet") => &[
            (
                "Desired",
                "integer",
                0,
                "The total number of nodes that should be running the daemon pod (including nodes correctly running the daemon pod).",
            ),
            (
                "Current",
                "integer",
                0,
                "The number of nodes that are running at least 1 daemon pod and are supposed to run the daemon pod.",
            ),
            (
                "Ready",
                "integer",
                0,
                "numberReady is the number of nodes that should be running the daemon pod and have one or more of the daemon pod running with a Ready Condition.",
            ),
            (
                "Up-to-date",
                "integer",
                0,
                "The total number of nodes that are running updated daemon pod",
            ),
            (
                "Available",
                "integer",
                0,
                "The number of nodes that should be running the daemon pod and have one or more of the daemon pod running and available (ready for at least spec.minReadySeconds)",
            ),
            (
                "Node Selector",
                "string",
                0,
                "NodeSelector is a selector which must be true for the pod to fit on a node. Selector which must match a node's labels for the pod to be scheduled on that node.",
            ),
            AGE,
            CONTAINERS,
            IMAGES,
            (
                "Selector",
                "string",
                1,
                "A label query over pods that are managed by the daemon set.",
            ),
        ],
        ("batch", "Job") => &[
            ("Status", "string", 0, "Status of the job."),
            (
                "Completions",
                "string",
                0,
                "The number of pods which reached phase Succeeded.",
            ),
            (
                "Duration",
                "string",
                0,
                "Time required to complete the job.",
            ),
            AGE,
            CONTAINERS,
            IMAGES,
            (
                "Selector",
                "string",
                1,
                "A label query over pods that should match the pod count.",
            ),
        ],
        ("batch", "CronJob") => &[
            (
                "Schedule",
                "string",
                0,
                "The schedule in Cron format, see https://en.wikipedia.org/wiki/Cron.",
            ),
            (
                "Timezone",
                "string",
                0,
                "The time zone name for the given schedule, see https://en.wikipedia.org/wiki/List_of_tz_database_time_zones.",
            ),
            (
                "Suspend",
                "boolean",
                0,
                "This flag tells the controller to suspend subsequent executions, it does not apply to already started executions.  Defaults to false.",
            ),
            (
                "Active",
                "integer",
                0,
                "A list of pointers to currently running jobs.",
            ),
            (
                "Last Schedule",
                "string",
                0,
                "Information when was the last time the job was successfully scheduled.",
            ),
            AGE,
            CONTAINERS,
            IMAGES,
            (
                "Selector",
                "string",
                1,
                "A label query over pods that should match the pod count.",
            ),
        ],
        ("", "Node") => &[
            ("Status", "string", 0, "The status of the node"),
            ("Roles", "string", 0, "The roles of the node"),
            AGE,
            (
                "Version",
                "string",
                0,
                "Kubelet Version reported by the node.",
            ),
            (
                "Internal-IP",
                "string",
                1,
                "List of addresses reachable to the node.",
            ),
            (
                "External-IP",
                "string",
                1,
                "List of addresses reachable to the node.",
            ),
            (
                "OS-Image",
                "string",
                1,
                "OS Image reported by the node from /etc/os-release (e.g. Debian GNU/Linux 7 (wheezy)).",
            ),
            (
                "Kernel-Version",
                "string",
                1,
                "Kernel Version reported by the node from 'uname -r' (e.g. 3.16.0-0.bpo.4-amd64).",
            ),
            (
                "Container-Runtime",
                "string",
                1,
                "ContainerRuntime Version reported by the node through runtime remote API (e.g. containerd://1.4.2).",
            ),
        ],
        _ => return None,
    })
}
