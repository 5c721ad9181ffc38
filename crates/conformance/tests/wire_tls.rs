//! The conformance suite with security on: the harness behind `Harness.Connect` over mutual TLS
//! (certificates made for the run), every frame authenticated and encrypted.
#![allow(clippy::tests_outside_test_module, clippy::unwrap_used)]

agentsessions_conformance::conformance_suite!(agentsessions_conformance::WireTls);

mod link {
    use std::sync::Arc;

    use agentsessions_api::Harness;
    use agentsessions_conformance::MtlsLink;
    use agentsessions_harnesses::EchoHarness;
    use agentsessions_harnesswire::RemoteHarness;

    // The link the suite runs over really is mutual TLS: the host with its certificate gets
    // through; a host without one, or one speaking cleartext, does not.
    #[tokio::test]
    async fn only_a_host_with_a_certificate_gets_through() {
        let link = MtlsLink::serve(Arc::new(EchoHarness::new())).await;
        let described = link.remote(true).describe().await.unwrap();
        assert_eq!(
            described.id,
            EchoHarness::new().describe().await.unwrap().id
        );
        link.remote(false).describe().await.unwrap_err();
        RemoteHarness::connect_lazy(&format!("127.0.0.1:{}", link.port))
            .unwrap()
            .with_describe_timeout(std::time::Duration::from_secs(2))
            .describe()
            .await
            .unwrap_err();
    }
}
