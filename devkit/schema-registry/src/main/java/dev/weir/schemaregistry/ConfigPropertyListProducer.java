package dev.weir.schemaregistry;

import io.apicurio.common.apps.config.DynamicConfigPropertyList;
import java.util.List;
import javax.enterprise.inject.Produces;
import javax.inject.Singleton;

/**
 * The list of dynamic configuration properties Apicurio Registry's own
 * build generates (apicurio-common-app-components-config-index): empty, as
 * the tests change no property at run time.
 */
public class ConfigPropertyListProducer {
    @Produces
    @Singleton
    DynamicConfigPropertyList dynamicConfigPropertyList() {
        return new DynamicConfigPropertyList(List.of());
    }
}
