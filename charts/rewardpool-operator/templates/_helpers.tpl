{{- define "rewardpool.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}{{ .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else -}}{{ printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" }}{{- end -}}
{{- end -}}

{{- define "rewardpool.labels" -}}
app.kubernetes.io/name: rewardpool-operator
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "rewardpool.selectorLabels" -}}
app.kubernetes.io/name: rewardpool-operator
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "rewardpool.serviceAccountName" -}}
{{- default (include "rewardpool.fullname" .) .Values.serviceAccount.name -}}
{{- end -}}

{{/* What the operator does in a namespace: pools (read, status), pods, services, attachments, events, and the
pools' control-token Secrets: get and create only (no list or watch, so it cannot enumerate Secrets; RBAC
cannot select by label, so the write guard policy limits its Secret writes to control tokens). */}}
{{- define "rewardpool.namespacedRules" -}}
- apiGroups: [rewardpool.io]
  resources: [rewardpools]
  verbs: [get, list, watch]
- apiGroups: [rewardpool.io]
  resources: [rewardpools/status, rewardpools/scale]
  verbs: [get, patch, update]
# blockOwnerDeletion on owned objects needs update on the owner's finalizers where the API server enforces
# owner-reference permissions (OwnerReferencesPermissionEnforcement).
- apiGroups: [rewardpool.io]
  resources: [rewardpools/finalizers]
  verbs: [update]
- apiGroups: [""]
  resources: [pods]
  verbs: [get, list, watch, create, delete, patch]
- apiGroups: [""]
  resources: [services]
  verbs: [get, list, watch, create, patch]
- apiGroups: [policy]
  resources: [poddisruptionbudgets]
  verbs: [get, list, watch, create, patch]
- apiGroups: [k8s.cni.cncf.io]
  resources: [network-attachment-definitions]
  verbs: [get, list, watch, create, patch]
- apiGroups: ["", events.k8s.io]
  resources: [events]
  verbs: [create, patch]
- apiGroups: [""]
  resources: [secrets]
  verbs: [get, create]
# scorer.model.pvc: the claim exists (else the pool says ModelUnavailable while its pods wait);
# scorer.model.cache: the claim bound to the cache's local volume (deleted with the cache)
- apiGroups: [""]
  resources: [persistentvolumeclaims]
  verbs: [get, create, patch, delete]
{{- end -}}

{{/* Namespaces whose worker pods get the chart's NetworkPolicy. */}}
{{- define "rewardpool.policyNamespaces" -}}
{{- default .Values.watchNamespaces .Values.networkPolicy.namespaces | toJson -}}
{{- end -}}

{{/* Cluster-scoped reads: node capacity (does a worker fit?), namespace labels (Pod Security level) and CRD
discovery (kopf). */}}
{{- define "rewardpool.clusterRules" -}}
- apiGroups: [""]
  resources: [nodes]
  verbs: [get, list, watch]
- apiGroups: [""]
  resources: [namespaces]
  verbs: [get]
- apiGroups: [apiextensions.k8s.io]
  resources: [customresourcedefinitions]
  verbs: [get, list, watch]
# RewardModelCache: its pools' placement, its summary status, its deletion held while pools use it (kopf's
# finalizer), its local volumes (one per namespace that uses it)
- apiGroups: [rewardpool.io]
  resources: [rewardmodelcaches]
  verbs: [get, list, watch, patch]
- apiGroups: [rewardpool.io]
  resources: [rewardmodelcaches/status]
  verbs: [patch]
- apiGroups: [""]
  resources: [persistentvolumes]
  verbs: [get, list, create, patch, delete]
{{- end -}}
