{{/* The chart name, overridable. */}}
{{- define "informant.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The release's full name: release name, plus the chart name unless already in it. */}}
{{- define "informant.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/* Labels on every object. */}}
{{- define "informant.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "informant.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/* Labels the Deployment selects its pods by. */}}
{{- define "informant.selectorLabels" -}}
app.kubernetes.io/name: {{ include "informant.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* The ServiceAccount the pods run as. */}}
{{- define "informant.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "informant.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The leader-election Lease's name. */}}
{{- define "informant.leaseName" -}}
{{- default (include "informant.fullname" .) .Values.leaderElection.leaseName }}
{{- end }}

{{- define "informant.shardGroup" -}}
{{- default (include "informant.fullname" .) .Values.sharding.group }}
{{- end }}

{{/* The admission replicas' name (their Deployment, Service and ServiceAccount). */}}
{{- define "informant.admissionName" -}}
{{- printf "%s-admission" (include "informant.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Labels the admission Deployment selects its pods by: not the event replicas' (whose
  selector must not take them). */}}
{{- define "informant.admissionSelectorLabels" -}}
app.kubernetes.io/name: {{ printf "%s-admission" (include "informant.name" .) | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* The webhook configurations' name. */}}
{{- define "informant.webhookName" -}}
{{- default (include "informant.fullname" .) .Values.admission.webhookName }}
{{- end }}

{{/* The Secret of the admission CA and certificate. */}}
{{- define "informant.admissionSecret" -}}
{{- default (printf "%s-admission-tls" (include "informant.fullname" .)) .Values.admission.certSecret }}
{{- end }}

{{/* Registry logins and CA for plugins pulled from OCI registries, and the public keys of
  trust policies, mounted by the kubelet (the ServiceAccount reads no Secret or ConfigMap for
  them): a container's volumeMounts. */}}
{{- define "informant.registryMounts" -}}
{{- range .Values.registry.pullSecrets }}
- name: registry-{{ . }}
  mountPath: /etc/informant-registry/{{ . }}
  readOnly: true
{{- end }}
{{- if .Values.registry.caSecret.name }}
- name: registry-ca
  mountPath: /etc/informant-registry-ca
  readOnly: true
{{- end }}
{{- range .Values.registry.trustKeys }}
- name: registry-keys-{{ . }}
  mountPath: /etc/informant-keys/{{ . }}
  readOnly: true
{{- end }}
{{- end }}

{{/* The pod's volumes for informant.registryMounts. */}}
{{- define "informant.registryVolumes" -}}
{{- range .Values.registry.pullSecrets }}
- name: registry-{{ . }}
  secret:
    secretName: {{ . }}
    defaultMode: 0440
{{- end }}
{{- if .Values.registry.caSecret.name }}
- name: registry-ca
  secret:
    secretName: {{ .Values.registry.caSecret.name }}
    defaultMode: 0440
{{- end }}
{{- range .Values.registry.trustKeys }}
- name: registry-keys-{{ . }}
  configMap:
    name: {{ . }}
{{- end }}
{{- end }}
