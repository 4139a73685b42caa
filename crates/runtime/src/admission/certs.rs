//! Certificates the host manages for its webhook server, shared by every replica through one
//! Secret (`--admission-cert-secret NAMESPACE/NAME`).
//!
//! Contract:
//! - The Secret (type `kubernetes.io/tls` when the host makes it; one made empty beforehand, as
//!   the Helm chart does so that the host needs no right to create Secrets, keeps its type)
//!   holds the serving pair (`tls.crt`, `tls.key`), the
//!   CA that signed it (`ca.key`) and the bundle clients trust (`ca.crt`: the CA, and during a
//!   rollover the previous one too). Validity and the CA's name are in its annotations.
//! - The first replica to find no Secret makes a CA and a serving pair and creates it; a replica
//!   that loses that race reads the winner's. Every replica serves the pair the Secret holds and
//!   reads it again every [`CertOptions::refresh`], so a second replica serves the same
//!   certificate, and a rotation reaches all of them.
//! - A serving pair with less than a third of its life left is replaced by one signed by the
//!   same CA: clients trust both, so no request fails. The CA is rolled over in two steps: a new
//!   CA joins the bundle first (the webhook configurations take the bundle), and only a
//!   [`CertOptions::ca_settle`] later does the serving pair come from it.
//! - Updates are conditional on the Secret's resourceVersion: of two replicas rotating at once,
//!   one writes and the other reads what it wrote. The new pair is served by new connections;
//!   connections open keep theirs.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, PostParams};
use tokio::sync::watch;

use crate::tls::{Current, TlsError};

/// The annotation holding when the serving pair stops being valid (RFC 3339).
pub(crate) const NOT_AFTER: &str = "informant.dev/serving-not-after";
/// The annotation holding when the CA stops being valid (RFC 3339).
pub(crate) const CA_NOT_AFTER: &str = "informant.dev/ca-not-after";
/// The annotation naming the CA (its common name, from which it is rebuilt to sign).
pub(crate) const CA_NAME: &str = "informant.dev/ca-name";
/// The annotation holding when the current CA joined the bundle (RFC 3339).
pub(crate) const CA_SINCE: &str = "informant.dev/ca-since";
/// The annotation naming the CA that signed the serving pair.
pub(crate) const SERVING_CA: &str = "informant.dev/serving-ca";

/// How long certificates live and how often the Secret is read.
#[derive(Debug, Clone)]
pub struct CertOptions {
    /// The serving pair's lifetime; replaced with a third of it left.
    pub serving_for: Duration,
    /// The CA's lifetime; rolled over with a third of it left.
    pub ca_for: Duration,
    /// How often the Secret is read again (and rotation considered).
    pub refresh: Duration,
    /// How long a new CA is in the bundle before it signs the serving pair.
    pub ca_settle: Duration,
    /// Names the serving certificate is for (the Service's DNS names, ...), besides loopback.
    pub names: Vec<String>,
}

impl Default for CertOptions {
    fn default() -> Self {
        CertOptions {
            serving_for: Duration::from_secs(90 * 24 * 3600),
            ca_for: Duration::from_secs(10 * 365 * 24 * 3600),
            refresh: Duration::from_secs(30),
            ca_settle: Duration::from_secs(10 * 60),
            names: Vec::new(),
        }
    }
}

/// Why the managed certificates could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum CertError {
    /// Reading, creating or updating the Secret failed.
    #[error("admission certificates: Secret `{secret}`: {source}")]
    Api {
        /// `namespace/name`.
        secret: String,
        /// What the API server said.
        #[source]
        source: kube::Error,
    },
    /// The Secret holds something that is not a usable pair and CA.
    #[error("admission certificates: Secret `{secret}` {what}")]
    Invalid {
        /// `namespace/name`.
        secret: String,
        /// What is wrong.
        what: String,
    },
    /// Making a certificate failed.
    #[error("admission certificates: {0}")]
    Tls(#[from] TlsError),
}

/// The certificates one replica serves, kept in step with the Secret until dropped.
pub struct ManagedCerts {
    api: Api<Secret>,
    name: String,
    options: CertOptions,
    current: Arc<Current>,
    bundle: watch::Sender<Vec<u8>>,
    /// The Secret as last read or written.
    last: parking_lot::Mutex<Secret>,
    task: parking_lot::Mutex<Option<tokio::task::JoinHandle<()>>>,
}

impl Drop for ManagedCerts {
    fn drop(&mut self) {
        if let Some(t) = self.task.lock().take() {
            t.abort();
        }
    }
}

impl ManagedCerts {
    /// Reads (or creates) the Secret `namespace/name` and starts following it.
    pub async fn start(
        client: kube::Client,
        namespace: &str,
        name: &str,
        options: CertOptions,
    ) -> Result<Arc<ManagedCerts>, CertError> {
        let api: Api<Secret> = Api::namespaced(client, namespace);
        let secret = format!("{namespace}/{name}");
        let api_err = |source| CertError::Api {
            secret: secret.clone(),
            source,
        };
        let stored = match api.get_opt(name).await.map_err(api_err)? {
            // Made empty for this host (by the Helm chart, so that the host needs no right to
            // create Secrets): filled by the first replica to get to it.
            Some(empty) if field(&empty, "tls.crt").is_empty() => {
                let mut fresh = issue(name, &options, None)?;
                fresh.metadata = ObjectMeta {
                    annotations: fresh.metadata.annotations.take(),
                    ..empty.metadata.clone()
                };
                fresh.type_ = empty.type_.clone();
                match api.replace(name, &PostParams::default(), &fresh).await {
                    Ok(s) => s,
                    Err(kube::Error::Api(e)) if e.code == 409 => {
                        api.get(name).await.map_err(api_err)?
                    }
                    Err(e) => return Err(api_err(e)),
                }
            }
            Some(s) => s,
            None => {
                let fresh = issue(name, &options, None)?;
                match api.create(&PostParams::default(), &fresh).await {
                    Ok(s) => s,
                    // Another replica created it first: serve what it made.
                    Err(kube::Error::Api(e)) if e.code == 409 => {
                        api.get(name).await.map_err(api_err)?
                    }
                    Err(e) => return Err(api_err(e)),
                }
            }
        };
        let key = served(&secret, &stored)?;
        let certs = Arc::new(ManagedCerts {
            api,
            name: name.to_string(),
            current: Current::new(key),
            bundle: watch::channel(field(&stored, "ca.crt").to_vec()).0,
            options,
            last: parking_lot::Mutex::new(stored),
            task: parking_lot::Mutex::new(None),
        });
        let follower = Arc::downgrade(&certs);
        let refresh = certs.options.refresh;
        *certs.task.lock() = Some(tokio::spawn(async move {
            let mut tick = tokio::time::interval(refresh);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            tick.tick().await;
            loop {
                tick.tick().await;
                let Some(certs) = follower.upgrade() else {
                    return;
                };
                if let Err(e) = certs.refresh().await {
                    tracing::warn!(error = %e, "admission certificates: keeping the ones in use");
                }
            }
        }));
        Ok(certs)
    }

    /// What new connections are served with.
    pub(crate) fn resolver(&self) -> Arc<Current> {
        self.current.clone()
    }

    /// The CA bundle clients trust (PEM), following rollovers.
    pub fn bundle(&self) -> watch::Receiver<Vec<u8>> {
        self.bundle.subscribe()
    }

    fn secret_name(&self) -> String {
        format!("{}/{}", self.api.namespace().unwrap_or_default(), self.name)
    }

    /// Reads the Secret again, serves what it holds, and rotates what is due.
    pub async fn refresh(&self) -> Result<(), CertError> {
        let secret = self.secret_name();
        let stored = self
            .api
            .get(&self.name)
            .await
            .map_err(|source| CertError::Api {
                secret: secret.clone(),
                source,
            })?;
        self.adopt(stored)?;
        if let Some(next) = self.due()? {
            self.write(next).await?;
        }
        Ok(())
    }

    /// Replaces the serving pair now (signed by the current CA), whatever its age.
    pub async fn rotate(&self) -> Result<(), CertError> {
        let last = self.last.lock().clone();
        let next = issue(&self.name, &self.options, Some((&last, Step::Serving)))?;
        self.write(next).await
    }

    /// Rolls the CA over now: a new CA joins the bundle; it signs the serving pair once it has
    /// been there [`CertOptions::ca_settle`].
    pub async fn roll_ca(&self) -> Result<(), CertError> {
        let last = self.last.lock().clone();
        let next = issue(&self.name, &self.options, Some((&last, Step::NewCa)))?;
        self.write(next).await
    }

    /// Serves `stored` if it differs from what is served.
    fn adopt(&self, stored: Secret) -> Result<(), CertError> {
        let mut last = self.last.lock();
        if last.data == stored.data && last.metadata.annotations == stored.metadata.annotations {
            *last = stored;
            return Ok(());
        }
        let key = served(&self.secret_name(), &stored)?;
        self.current.set(key);
        self.bundle.send_replace(field(&stored, "ca.crt").to_vec());
        tracing::info!(secret = %self.secret_name(), "admission certificates: serving the Secret's current pair");
        *last = stored;
        Ok(())
    }

    /// What the Secret should become now, if anything is due.
    fn due(&self) -> Result<Option<Secret>, CertError> {
        let last = self.last.lock().clone();
        let now = jiff::Timestamp::now();
        let at = |key: &str| annotation(&last, key).and_then(|t| t.parse::<jiff::Timestamp>().ok());
        let third = |life: Duration| {
            jiff::SignedDuration::try_from(life / 3).unwrap_or(jiff::SignedDuration::MAX)
        };
        let ca_due = at(CA_NOT_AFTER).is_none_or(|t| now >= t - third(self.options.ca_for));
        let serving_due = at(NOT_AFTER).is_none_or(|t| now >= t - third(self.options.serving_for));
        let settled = at(CA_SINCE).is_some_and(|t| {
            now >= t + jiff::SignedDuration::try_from(self.options.ca_settle).unwrap_or_default()
        });
        let signed_by_current = annotation(&last, SERVING_CA) == annotation(&last, CA_NAME);
        let step = if ca_due {
            Some(Step::NewCa)
        } else if serving_due || (!signed_by_current && settled) {
            Some(Step::Serving)
        } else {
            None
        };
        step.map(|step| issue(&self.name, &self.options, Some((&last, step))))
            .transpose()
    }

    /// Writes `next` over the Secret as last read (or the conflict's winner is read).
    async fn write(&self, next: Secret) -> Result<(), CertError> {
        let secret = self.secret_name();
        match self
            .api
            .replace(&self.name, &PostParams::default(), &next)
            .await
        {
            Ok(written) => self.adopt(written),
            // Another replica rotated first: serve what it wrote.
            Err(kube::Error::Api(e)) if e.code == 409 => {
                let stored = self
                    .api
                    .get(&self.name)
                    .await
                    .map_err(|source| CertError::Api { secret, source })?;
                self.adopt(stored)
            }
            Err(source) => Err(CertError::Api { secret, source }),
        }
    }
}

/// What an issue changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    /// A new serving pair from the current CA.
    Serving,
    /// A new CA in the bundle (with the previous one); the serving pair stays.
    NewCa,
}

fn field<'s>(s: &'s Secret, key: &str) -> &'s [u8] {
    s.data
        .as_ref()
        .and_then(|d| d.get(key))
        .map_or(&[][..], |b| b.0.as_slice())
}

fn annotation<'s>(s: &'s Secret, key: &str) -> Option<&'s str> {
    s.metadata
        .annotations
        .as_ref()?
        .get(key)
        .map(String::as_str)
}

/// The serving pair `stored` holds, checked.
fn served(
    secret: &str,
    stored: &Secret,
) -> Result<tokio_rustls::rustls::sign::CertifiedKey, CertError> {
    crate::tls::certified_key(field(stored, "tls.crt"), field(stored, "tls.key")).map_err(|e| {
        CertError::Invalid {
            secret: secret.into(),
            what: format!("holds no usable serving pair (`tls.crt`, `tls.key`): {e}"),
        }
    })
}

/// When a certificate made now for `life` stops being valid as rotation counts it, and the
/// day (UTC) its `notAfter` is set to: the next midnight after that, certificates here being
/// counted in days.
fn expiry(life: Duration) -> (jiff::Timestamp, (i32, u8, u8)) {
    let end = jiff::Timestamp::now()
        .checked_add(jiff::SignedDuration::try_from(life).unwrap_or(jiff::SignedDuration::MAX))
        .unwrap_or(jiff::Timestamp::MAX);
    let day = end
        .to_zoned(jiff::tz::TimeZone::UTC)
        .date()
        .tomorrow()
        .unwrap_or(jiff::civil::date(9999, 12, 31));
    (
        end,
        (i32::from(day.year()), day.month() as u8, day.day() as u8),
    )
}

/// CA parameters for `name`: rebuilt the same each time, so a CA restored from the Secret signs
/// as the one that was made.
fn ca_params(name: &str, not_after: Option<(i32, u8, u8)>) -> rcgen::CertificateParams {
    let mut params = rcgen::CertificateParams::default();
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Constrained(0));
    params.distinguished_name = rcgen::DistinguishedName::new();
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, name);
    params.key_usages = vec![
        rcgen::KeyUsagePurpose::KeyCertSign,
        rcgen::KeyUsagePurpose::DigitalSignature,
    ];
    if let Some((y, m, d)) = not_after {
        params.not_after = rcgen::date_time_ymd(y, m, d);
    }
    params
}

/// The Secret `name` should hold after `step` on `last` (a first one without `last`).
fn issue(
    name: &str,
    options: &CertOptions,
    last: Option<(&Secret, Step)>,
) -> Result<Secret, CertError> {
    let generate = |e| CertError::Tls(TlsError::Generate(e));
    let mut annotations: BTreeMap<String, String> = last
        .and_then(|(s, _)| s.metadata.annotations.clone())
        .unwrap_or_default();
    let mut data: BTreeMap<String, ByteString> =
        last.and_then(|(s, _)| s.data.clone()).unwrap_or_default();
    let make_ca = last.is_none_or(|(_, step)| step == Step::NewCa);
    // The CA that signs a new serving pair: the current one, or a new one.
    let (ca_name, ca_key_pem) = if make_ca {
        let (end, day) = expiry(options.ca_for);
        let ca_name = format!("informant admission CA {}", jiff::Timestamp::now());
        let key = rcgen::KeyPair::generate().map_err(generate)?;
        let cert = ca_params(&ca_name, Some(day))
            .self_signed(&key)
            .map_err(generate)?;
        // The bundle keeps the previous CA while serving pairs it signed may still be served.
        let mut bundle = cert.pem();
        if let Some((s, _)) = last {
            let previous = String::from_utf8_lossy(field(s, "ca.crt")).into_owned();
            if let Some(current) = previous
                .split_inclusive("-----END CERTIFICATE-----\n")
                .next()
            {
                bundle.push_str(current);
            }
        }
        data.insert("ca.crt".into(), ByteString(bundle.into_bytes()));
        data.insert(
            "ca.key".into(),
            ByteString(key.serialize_pem().into_bytes()),
        );
        annotations.insert(CA_NAME.into(), ca_name.clone());
        annotations.insert(CA_NOT_AFTER.into(), end.to_string());
        annotations.insert(CA_SINCE.into(), jiff::Timestamp::now().to_string());
        (ca_name, key.serialize_pem())
    } else {
        let ca_name = annotations.get(CA_NAME).cloned().unwrap_or_default();
        let key =
            String::from_utf8_lossy(&data.get("ca.key").map(|b| b.0.clone()).unwrap_or_default())
                .into_owned();
        (ca_name, key)
    };
    // A new CA with a serving pair already there only joins the bundle (step one).
    let keeps_serving = matches!(last, Some((_, Step::NewCa)));
    if !keeps_serving {
        let ca_key = rcgen::KeyPair::from_pem(&ca_key_pem).map_err(generate)?;
        let issuer = rcgen::Issuer::new(ca_params(&ca_name, None), ca_key);
        let mut sans: Vec<String> = ["localhost", "127.0.0.1", "::1"].map(String::from).to_vec();
        sans.extend(options.names.iter().cloned());
        let leaf_key = rcgen::KeyPair::generate().map_err(generate)?;
        let (end, (y, m, d)) = expiry(options.serving_for);
        let mut params = rcgen::CertificateParams::new(sans).map_err(generate)?;
        params.not_after = rcgen::date_time_ymd(y, m, d);
        let leaf = params.signed_by(&leaf_key, &issuer).map_err(generate)?;
        data.insert("tls.crt".into(), ByteString(leaf.pem().into_bytes()));
        data.insert(
            "tls.key".into(),
            ByteString(leaf_key.serialize_pem().into_bytes()),
        );
        annotations.insert(NOT_AFTER.into(), end.to_string());
        annotations.insert(SERVING_CA.into(), ca_name);
    }
    let metadata = match last {
        Some((s, _)) => ObjectMeta {
            annotations: Some(annotations),
            ..s.metadata.clone()
        },
        None => ObjectMeta {
            name: Some(name.to_string()),
            annotations: Some(annotations),
            labels: Some(BTreeMap::from([(
                "app.kubernetes.io/managed-by".to_string(),
                "informant".to_string(),
            )])),
            ..Default::default()
        },
    };
    Ok(Secret {
        metadata,
        // A Secret's type is fixed once made: one made `Opaque` (empty, by the chart) stays so.
        type_: last
            .and_then(|(s, _)| s.type_.clone())
            .or(Some("kubernetes.io/tls".into())),
        data: Some(data),
        ..Default::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio_rustls::rustls;
    use tokio_rustls::rustls::client::danger::ServerCertVerifier;
    use tokio_rustls::rustls::pki_types::pem::PemObject;
    use tokio_rustls::rustls::pki_types::{CertificateDer, ServerName, UnixTime};

    /// Whether a client trusting `bundle` accepts `secret`'s serving pair for 127.0.0.1.
    fn verifies(bundle: &[u8], secret: &Secret) -> bool {
        let mut roots = rustls::RootCertStore::empty();
        for c in CertificateDer::pem_slice_iter(bundle) {
            roots.add(c.unwrap()).unwrap();
        }
        let verifier = rustls::client::WebPkiServerVerifier::builder_with_provider(
            Arc::new(roots),
            Arc::new(rustls::crypto::ring::default_provider()),
        )
        .build()
        .unwrap();
        let chain: Vec<CertificateDer> = CertificateDer::pem_slice_iter(field(secret, "tls.crt"))
            .map(Result::unwrap)
            .collect();
        verifier
            .verify_server_cert(
                &chain[0],
                &chain[1..],
                &ServerName::try_from("127.0.0.1").unwrap(),
                &[],
                UnixTime::now(),
            )
            .is_ok()
    }

    fn certs(s: &Secret) -> usize {
        String::from_utf8_lossy(field(s, "ca.crt"))
            .matches("BEGIN CERTIFICATE")
            .count()
    }

    #[test]
    fn a_rotated_pair_is_trusted_by_the_bundle_clients_already_have() {
        let options = CertOptions::default();
        let first = issue("admission-tls", &options, None).unwrap();
        assert!(served("s", &first).is_ok());
        assert!(verifies(field(&first, "ca.crt"), &first));
        let rotated = issue("admission-tls", &options, Some((&first, Step::Serving))).unwrap();
        assert_ne!(field(&rotated, "tls.crt"), field(&first, "tls.crt"));
        assert_eq!(field(&rotated, "ca.crt"), field(&first, "ca.crt"));
        assert!(
            verifies(field(&first, "ca.crt"), &rotated),
            "the old bundle trusts it"
        );
    }

    #[test]
    fn a_ca_rollover_adds_to_the_bundle_before_it_signs() {
        let options = CertOptions::default();
        let first = issue("admission-tls", &options, None).unwrap();
        let joined = issue("admission-tls", &options, Some((&first, Step::NewCa))).unwrap();
        assert_eq!(certs(&joined), 2);
        assert_eq!(
            field(&joined, "tls.crt"),
            field(&first, "tls.crt"),
            "still served"
        );
        assert!(verifies(field(&joined, "ca.crt"), &joined));
        assert_ne!(
            annotation(&joined, CA_NAME),
            annotation(&joined, SERVING_CA)
        );
        let switched = issue("admission-tls", &options, Some((&joined, Step::Serving))).unwrap();
        assert_eq!(
            annotation(&switched, CA_NAME),
            annotation(&switched, SERVING_CA)
        );
        assert!(
            verifies(field(&joined, "ca.crt"), &switched),
            "the two-CA bundle trusts it"
        );
        assert!(
            !verifies(field(&first, "ca.crt"), &switched),
            "signed by the new CA"
        );
        // A second rollover keeps two CAs: the new one and the one it replaces.
        let again = issue("admission-tls", &options, Some((&switched, Step::NewCa))).unwrap();
        assert_eq!(certs(&again), 2);
        assert!(verifies(field(&again, "ca.crt"), &again));
    }
}
